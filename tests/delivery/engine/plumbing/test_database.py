"""engine/plumbing/database.py. After a commit: nothing for a rollback, and an action that fails is logged while
the ones queued after it still run, outside a transaction as inside one. Statements compiled once: the same answers
as their querysets, and shapes that could not be run again refused. `insert`: the rows `bulk_create` writes."""

import logging
import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import FieldError, ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Value, signals
from django.db.models.functions import Concat
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from delivery.engine.accounts import catalog
from delivery.engine.claiming import leases
from delivery.engine.intake import fanout
from delivery.engine.plumbing import database
from delivery.engine.plumbing.database import Statement, after_commit, insert, insert_together, preparer
from delivery.models import Attempt, Delivery, Message
from delivery.rules.vocabulary import DeliveryStatus
from delivery.web.api import authentication, topics
from subscriptions.models import Endpoint, EventType, Subscription, Tenant, Topic

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failing_action_is_logged_and_the_next_still_runs(caplog):
    ran = []

    def fails(n):
        raise RuntimeError(f"receiver {n} broke")

    with caplog.at_level(logging.ERROR), transaction.atomic():
        after_commit(fails, 1)
        after_commit(ran.append, "second")
        assert ran == []  # not before the commit
    assert ran == ["second"]
    assert "after a commit, test_a_failing_action_is_logged_and_the_next_still_runs.<locals>.fails failed" in \
        caplog.text and "receiver 1 broke" in caplog.text


def test_nothing_runs_for_a_rollback_and_at_once_outside_a_transaction():
    ran = []
    with pytest.raises(ValueError), transaction.atomic():
        after_commit(ran.append, "rolled back")
        raise ValueError
    after_commit(ran.append, "at once")
    assert ran == ["at once"]


# --- statements compiled once per process -------------------------------------------------------------------------

def columns_of(obj) -> tuple:
    return tuple(getattr(obj, field.attname) for field in type(obj)._meta.concrete_fields)


def same(found, expected) -> bool:
    """Rows equal, and instances equal column by column (Model.__eq__ compares primary keys only)."""
    if found and hasattr(found[0], "_meta"):
        return [columns_of(obj) for obj in found] == [columns_of(obj) for obj in expected]
    return found == expected


@pytest.fixture
def catalog_world(django_user_model):
    """Two owners, a tenant, topics with subscriptions of every audience and JSON columns, and event types."""
    owner = django_user_model.objects.create_user("statement-owner")
    other = django_user_model.objects.create_user("statement-other")
    tenant = Tenant.objects.create(owner=owner, external_id="acme", name="Acme")
    topic = Topic.objects.create(owner=owner, name="orders", delivery_policy={"healthyRetryPolicy": {"numRetries": 2}})
    Topic.objects.create(owner=other, name="orders")
    for n, (tenant_of, policy) in enumerate([(None, {"region": ["eu"]}), (tenant, None), (None, None)]):
        endpoint = Endpoint.objects.create(owner=owner, tenant=tenant_of, url=f"https://example.com/hook/{n}")
        Subscription.objects.create(topic=topic, endpoint=endpoint, tenant=tenant_of, filter_policy=policy,
                                    event_types=["order.created"] if n == 2 else [], status="confirmed",
                                    confirmed_at=timezone.now())
    for name, validate in [("order.created", True), ("order.paid", True), ("order.gone", False)]:
        EventType.objects.create(owner=owner, name=name, schema={"type": "object"}, validate_payloads=validate)
    return owner, other, tenant, topic


def test_every_hot_statement_answers_what_its_queryset_answers(catalog_world):
    """Each statement the hot paths use, run compiled and run by the ORM from the same queryset: the same rows,
    the same instances column by column (JSON decoded, times aware), for values that find rows and values that
    find none."""
    owner, other, tenant, topic = catalog_world
    token = Token.objects.create(user=owner)
    messages = [Message.objects.create(topic=topic, payload={"n": n, "text": "é\u2028"}, attributes={"k": ["v"]},
                                       published_at=timezone.now(), tenant=tenant if n else None) for n in range(2)]
    subscriptions = list(Subscription.objects.filter(topic=topic))
    cases = [
        (authentication.TOKEN, [(token.key,), ("no-such-key",)]),
        (topics.OWN_TOPIC_BY_ID, [(owner.id, topic.id), (other.id, topic.id)]),
        (topics.OWN_TOPIC_BY_NAME, [(owner.id, "orders"), (other.id, "orders"), (owner.id, "missing")]),
        (fanout.AUDIENCE_SUBSCRIPTIONS["owner"], [(topic.id,)]),
        (fanout.AUDIENCE_SUBSCRIPTIONS["broadcast"], [(topic.id,)]),
        (fanout.AUDIENCE_SUBSCRIPTIONS["tenant"], [(topic.id, tenant.id), (topic.id, tenant.id + 1000)]),
        (catalog._validated_of(1), [(owner.id, "order.created"), (owner.id, "order.gone"), (other.id, "order.paid")]),
        (catalog._validated_of(3), [(owner.id, "order.created", "order.gone", "order.paid")]),
        # a claim's loads: a list of keys, one array parameter
        (leases.SUBSCRIPTIONS, [([s.id for s in subscriptions],), ([],)]),
        (leases.SUBSCRIPTIONS, [([subscriptions[0].id, subscriptions[0].id + 1000],)]),  # with its topic's columns
        (leases.MESSAGES, [([m.id for m in messages],), ([uuid.uuid4()],)]),
        (leases.ENDPOINTS, [([s.endpoint_id for s in subscriptions[:2]],)]),
    ]
    found_some = 0
    for statement, value_sets in cases:
        for values in value_sets:
            expected = list(statement.build(*values))
            found = statement.rows(*values)
            assert same(found, expected), (statement.build, values, found, expected)
            found_some += bool(found)
    assert found_some == 14  # the cases that should find rows did


def test_a_statement_refuses_a_shape_it_cannot_run_again():
    """A lookup that changes its value (icontains wraps it in %), a join read through select_related: refused
    when compiled, not run with the wrong SQL."""
    with pytest.raises(ValueError, match="do not reach the SQL unchanged"):
        Statement(lambda name: Topic.objects.filter(name__icontains=name), str).rows("ord")
    with pytest.raises(ValueError, match="every column of one model"):
        Statement(lambda pk: Topic.objects.filter(pk=pk).select_related("owner"), int).rows(1)
    with pytest.raises(ValueError, match="every column of one model, and nothing else"):
        Statement(lambda pk: Topic.objects.filter(pk=pk).annotate(n=Count("subscriptions")), int).rows(1)
    for shape in (lambda pk: Topic.objects.filter(pk=pk).values("id"),
                  lambda pk: Topic.objects.filter(pk=pk).values_list("id", flat=True)):
        with pytest.raises(ValueError, match="instances or values_list's tuples"):
            Statement(shape, int).rows(1)
    with pytest.raises(TypeError):
        Statement(lambda when: Topic.objects.filter(created_at__lt=when), object)


def test_constants_stay_constants_and_values_go_where_they_belong(catalog_world):
    owner, _, _, topic = catalog_world
    statement = Statement(lambda owner_id, name: Topic.objects.filter(
        owner_id=owner_id, name=name, open_to_tenants=False).exclude(description="x").values_list("id"), int, str)
    assert statement.rows(owner.id, "orders") == [(topic.id,)]
    assert statement.rows(owner.id, "other") == []
    with pytest.raises(TypeError, match="takes 2 values"):
        statement.rows(owner.id)


def test_insert_writes_what_bulk_create_writes(catalog_world):
    """Messages (a primary key chosen in Python) and deliveries (one from the database): the same columns as
    `bulk_create` writes, primary keys set, the instances saved."""
    owner, _, tenant, topic = catalog_world
    subscription = Subscription.objects.filter(topic=topic).first()
    now = timezone.now()

    def messages():
        return [Message(topic=topic, payload={"n": n, "text": "ü"}, published_at=now, attributes={"a": "b"},
                        tenant=tenant if n else None, fanout_skipped={}, subject=f"s{n}") for n in range(3)]

    ours, theirs = insert(messages()), Message.objects.bulk_create(messages())
    assert all(not m._state.adding and m._state.db == "default" for m in ours)

    fields = [f.attname for f in Message._meta.concrete_fields if f.attname != "id"]
    read = lambda objs: [Message.objects.filter(pk=m.pk).values_list(*fields).get() for m in objs]  # noqa: E731
    assert read(ours) == read(theirs)

    def deliveries(message_list):
        return [Delivery(message=m, subscription=subscription, endpoint_id=subscription.endpoint_id,
                         owner_id=owner.id, status="pending", next_attempt_at=now) for m in message_list]

    written = insert(deliveries(ours), batch_size=2)  # two batches
    assert all(d.pk is not None for d in written) and len({d.pk for d in written}) == 3
    reference = Delivery.objects.bulk_create(deliveries(theirs))
    columns = [f.attname for f in Delivery._meta.concrete_fields if f.attname not in ("id", "message_id",
                                                                                       "created_at")]
    read = lambda objs: [Delivery.objects.filter(pk=d.pk).values_list(*columns).get() for d in objs]  # noqa: E731
    assert read(written) == read(reference)
    assert all(now <= d.created_at == Delivery.objects.get(pk=d.pk).created_at for d in written)  # auto_now_add


def test_insert_leaves_what_the_database_computes_to_bulk_create_and_refuses_mixed_rows(catalog_world):
    owner, _, _, topic = catalog_world
    computed = Message(topic=topic, payload=1, published_at=timezone.now(), fanout_skipped={},
                       subject=Concat(Value("a"), Value("b")))
    insert([computed])
    assert Message.objects.get(pk=computed.pk).subject == "ab"
    with pytest.raises(ValueError, match="all with a primary key or all without"):
        insert([Delivery(message=computed, pk=10**9), Delivery(message=computed)])


def test_insert_together_writes_what_two_inserts_write_in_one_statement(catalog_world):
    """Messages and their deliveries as one statement: the same rows as `insert` writes, the deliveries' keys set,
    no BEGIN or COMMIT; a failing row writes neither; shapes one statement cannot take are left to the caller."""
    owner, _, _, topic = catalog_world
    subscription = Subscription.objects.filter(topic=topic).first()
    now = timezone.now()

    def messages(count=2):
        return [Message(topic=topic, payload={"n": n}, published_at=now, fanout_skipped={}, subject=f"s{n}")
                for n in range(count)]

    def deliveries(message_list):
        return [Delivery(message=m, subscription=subscription, endpoint_id=subscription.endpoint_id,
                         owner_id=owner.id, status="pending", next_attempt_at=now) for m in message_list]

    ours, theirs = messages(), messages()
    ours_deliveries = deliveries(ours)
    with CaptureQueriesContext(connection) as statements:
        assert insert_together(ours, ours_deliveries)
    assert [q["sql"].split()[0] for q in statements.captured_queries] == ["WITH"]
    assert all(d.pk is not None and not d._state.adding for d in ours_deliveries)
    assert all(not m._state.adding for m in ours)
    reference = insert(deliveries(insert(theirs)))
    fields = [f.attname for f in Message._meta.concrete_fields if f.attname != "id"]
    read = lambda objs: [Message.objects.filter(pk=m.pk).values_list(*fields).get() for m in objs]  # noqa: E731
    assert read(ours) == read(theirs)
    columns = [f.attname for f in Delivery._meta.concrete_fields if f.attname not in ("id", "message_id",
                                                                                       "created_at")]
    read = lambda objs: [Delivery.objects.filter(pk=d.pk).values_list(*columns).get() for d in objs]  # noqa: E731
    assert read(ours_deliveries) == read(reference)
    assert [d.message_id for d in ours_deliveries] == [m.id for m in ours]

    # A delivery that cannot be written (a subscription that does not exist) leaves its message unwritten too.
    lonely = messages(1)
    broken = deliveries(lonely)
    broken[0].subscription_id = 10**9
    with pytest.raises(IntegrityError):
        insert_together(lonely, broken)
    assert not Message.objects.filter(pk=lonely[0].pk).exists()
    # A repeated message key: neither written.
    again = messages(1)
    again[0].pk = ours[0].pk
    with pytest.raises(IntegrityError):
        insert_together(again, deliveries(messages(1)))
    assert Delivery.objects.count() == 4

    # What one statement does not take: nothing written, False.
    assert not insert_together(messages(), [])
    assert not insert_together([], deliveries(messages(1)))
    assert not insert_together(deliveries(messages(1)), messages(1))  # first's keys chosen by the database
    too_many = messages(3)
    assert not insert_together(too_many, deliveries(too_many), most=2)
    assert Message.objects.count() == 4 and Delivery.objects.count() == 4


@pytest.mark.filterwarnings("ignore:DateTimeField .* received a naive datetime")  # the naive value, on purpose
def test_a_preparer_gives_what_the_field_would_give():
    """`preparer` skips `get_db_prep_save` only where it would return the value itself: every other value (an enum
    member, JSON, a string for an integer column, a naive time) still goes through the field. An integer is always
    a plain `int` (Django's is psycopg's Int4, naming its size): a column's array never mixes the two."""
    now = timezone.now()
    values = [None, 0, 7, 2**40, True, "", "text", "12", now, now.replace(tzinfo=None), DeliveryStatus.SUCCEEDED,
              {"a": [1]}, ["x"]]
    checked = 0
    for model in (Delivery, Attempt):
        for field in model._meta.concrete_fields:
            prepare = preparer(field, connection)
            for value in values:
                try:
                    expected = field.get_db_prep_save(value, connection)
                except (TypeError, ValueError, ValidationError):
                    continue  # a value this field refuses
                found = prepare(value)
                if isinstance(expected, int) and not isinstance(expected, bool) and type(expected) is not int:
                    assert type(found) is int, (field, value)
                    expected = int(expected)
                assert type(found) is type(expected), (field, value)
                assert getattr(found, "obj", found) == getattr(expected, "obj", expected), (field, value)
                checked += 1
    assert checked > 100


def test_anyof_is_no_lookup_a_filter_can_name():
    """The claim's array filter is an expression the engine builds, not a lookup an admin page's query string or an
    API filter could reach."""
    with pytest.raises(FieldError):
        list(Message.objects.filter(pk__any_of=[uuid.uuid4()]))


@pytest.mark.skipif(not database.on_psycopg3(connection), reason="server-side binding: PostgreSQL with psycopg 3")
@pytest.mark.parametrize("session_zone", ["UTC", "Asia/Kolkata"])
def test_a_bound_cursor_loads_date_times_as_djangos_cursor_does(session_zone):
    """Date-times read through a bound cursor are the values, with the zone, that Django's own cursor gives: with
    psycopg's C loader where the session is in UTC (as Django leaves it), with Django's loader otherwise."""
    sql = ("SELECT t FROM unnest(ARRAY['2026-11-27 03:04:05.123456+00', '1999-12-31 23:59:59+05:30', "
           "'0001-01-01 00:00:00+00', NULL]::timestamptz[]) AS t")
    with connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE %s", [session_zone])
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            djangos = cursor.fetchall()
        with database.bound_cursor() as cursor:
            cursor.execute(sql)
            bound = cursor.fetchall()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE 'UTC'")
    assert bound == djangos
    assert [value.tzinfo if value else None for (value,) in bound] == [
        value.tzinfo if value else None for (value,) in djangos]
    assert [value.utcoffset() for (value,) in bound[:3]] == [timedelta(0)] * 3


def test_instances_are_what_from_db_builds(catalog_world):
    """`instances` builds each row's model instance as `from_db` does: the same attributes and state, related
    objects still loaded on access; with a receiver of the model's post_init, through `from_db` itself."""
    Token.objects.create(user=catalog_world[0])
    for model in (Topic, Subscription, Endpoint, Token):
        names = [field.attname for field in model._meta.concrete_fields]
        rows = list(model.objects.values_list(*names))
        assert rows, model
        built = database.instances(model, "default", names, rows)
        reference = [model.from_db("default", names, row) for row in rows]
        for mine, theirs in zip(built, reference, strict=True):
            assert type(mine) is model and mine == theirs
            assert ({k: v for k, v in vars(mine).items() if k != "_state"}
                    == {k: v for k, v in vars(theirs).items() if k != "_state"})
            assert (mine._state.adding, mine._state.db) == (False, "default")
        if model is Subscription:
            assert built[0].topic == Topic.objects.get(pk=rows[0][names.index("topic_id")])

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    signals.post_init.connect(receiver, sender=Topic)
    try:
        names = [field.attname for field in Topic._meta.concrete_fields]
        built = database.instances(Topic, "default", names, list(Topic.objects.values_list(*names)))
    finally:
        signals.post_init.disconnect(receiver, sender=Topic)
    assert seen == built

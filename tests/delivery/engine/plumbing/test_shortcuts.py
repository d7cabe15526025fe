"""engine/plumbing/shortcuts.py: each shortcut gives what the framework gives. Statements compiled once answer what
their querysets answer, and shapes that could not be run again are refused; a preparer gives what its field's
`get_db_prep_save` gives; instances are what `from_db` builds; a publish body's serializer with its fields shared per
thread validates as DRF's own would, instance after instance and thread beside thread."""

import threading
import uuid

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Count, signals
from django.utils import timezone
from rest_framework import serializers
from rest_framework.authtoken.models import Token

from delivery.engine.accounts import catalog
from delivery.engine.claiming import leases
from delivery.engine.intake import fanout
from delivery.engine.plumbing import shortcuts
from delivery.engine.plumbing.shortcuts import SharedFields, Statement, preparer
from delivery.models import Attempt, Delivery, Message
from delivery.rules.vocabulary import DeliveryStatus
from delivery.web import selectors
from delivery.web.api.publishing import BatchEntrySerializer, PublishSerializer
from delivery.web.api.strict import StrictInput
from subscriptions.models import Endpoint, Subscription, Topic

pytestmark = pytest.mark.django_db(transaction=True)


def columns_of(obj) -> tuple:
    return tuple(getattr(obj, field.attname) for field in type(obj)._meta.concrete_fields)


def same(found, expected) -> bool:
    """Rows equal, and instances equal column by column (Model.__eq__ compares primary keys only)."""
    if found and hasattr(found[0], "_meta"):
        return [columns_of(obj) for obj in found] == [columns_of(obj) for obj in expected]
    return found == expected


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
        (selectors.TOKEN, [(token.key,), ("no-such-key",)]),
        (selectors.OWN_TOPIC_BY_ID, [(owner.id, topic.id), (other.id, topic.id)]),
        (selectors.OWN_TOPIC_BY_NAME, [(owner.id, "orders"), (other.id, "orders"), (owner.id, "missing")]),
        (fanout.AUDIENCE_SUBSCRIPTIONS["owner"], [(topic.id,)]),
        (fanout.AUDIENCE_SUBSCRIPTIONS["broadcast"], [(topic.id,)]),
        (fanout.AUDIENCE_SUBSCRIPTIONS["tenant"], [(topic.id, tenant.id), (topic.id, tenant.id + 1000)]),
        (catalog._types_statement(1), [(owner.id, "order.created"), (owner.id, "order.gone"),
                                       (other.id, "order.paid")]),
        (catalog._types_statement(3), [(owner.id, "order.created", "order.gone", "order.paid")]),
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
    assert found_some == 15  # the cases that should find rows did


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


def test_instances_are_what_from_db_builds(catalog_world):
    """`instances` builds each row's model instance as `from_db` does: the same attributes and state, related
    objects still loaded on access; with a receiver of the model's post_init, through `from_db` itself."""
    Token.objects.create(user=catalog_world[0])
    for model in (Topic, Subscription, Endpoint, Token):
        names = [field.attname for field in model._meta.concrete_fields]
        rows = list(model.objects.values_list(*names))
        assert rows, model
        built = shortcuts.instances(model, "default", names, rows)
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
        built = shortcuts.instances(Topic, "default", names, list(Topic.objects.values_list(*names)))
    finally:
        signals.post_init.disconnect(receiver, sender=Topic)
    assert seen == built



class Plain(StrictInput, serializers.Serializer):
    name = serializers.CharField(max_length=5)
    count = serializers.IntegerField(required=False, default=1)
    flag = serializers.BooleanField(required=False, default=False)


class Shared(SharedFields, Plain):
    def validate_name(self, value):  # the instance's own field-level hook still runs
        if value == "no":
            raise serializers.ValidationError("not this one")
        return value


BODIES = [
    {"name": "abc"}, {"name": "abc", "count": "7", "flag": "true"}, {"name": "toolong"}, {"count": 2},
    {"name": "abc", "nmae": "typo"}, {"name": 12}, {"name": "abc", "count": "x"}, [], "text",
]


def outcome(serializer_class, data):
    serializer = serializer_class(data=data)
    return (True, dict(serializer.validated_data)) if serializer.is_valid() else (False, serializer.errors)


def test_shared_fields_validate_as_drf_does():
    for data in BODIES:
        assert outcome(Shared, data) == outcome(Plain, data), data
    assert outcome(Shared, {"name": "no"}) == (False, {"name": ["not this one"]})


def test_fields_are_built_once_per_thread_and_class():
    first, second = Shared(data={"name": "a"}), Shared(data={"name": "b"})
    assert first.fields is second.fields
    assert first.fields["name"].parent is not first  # bound to the thread's template, not to a request's instance
    assert PublishSerializer().fields is not BatchEntrySerializer().fields  # per class: the batch entry has `id`
    assert "id" in BatchEntrySerializer().fields and "id" not in PublishSerializer().fields
    other = []
    thread = threading.Thread(target=lambda: other.append(Shared(data={}).fields))
    thread.start()
    thread.join()
    assert other[0] is not first.fields


def test_partial_or_with_a_context_builds_its_own():
    shared = Shared(data={}).fields
    partial = Shared(data={"count": 3}, partial=True)
    assert partial.fields is not shared and partial.fields is partial.fields
    assert outcome(lambda data: Shared(data=data, partial=True), {"count": 3}) == (True, {"count": 3})
    assert Shared(data={}, context={"request": None}).fields is not shared


def test_threads_validating_at_once_see_their_own_data():
    wrong = []

    def validate(n):
        for _ in range(300):
            body = {"payload": {"n": n}, "event_type": f"t.{n}", "attributes": {"k": str(n)}}
            serializer = PublishSerializer(data=body)
            if not serializer.is_valid() or serializer.validated_data["event_type"] != f"t.{n}" or \
                    serializer.validated_data["payload"] != {"n": n}:
                wrong.append((n, serializer.errors))

    threads = [threading.Thread(target=validate, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []

"""engine/plumbing/database.py. After a commit: nothing for a rollback, and an action that fails is logged while
the ones queued after it still run, outside a transaction as inside one. `insert`: the rows `bulk_create` writes.
(Statements compiled once, instances and preparers: test_shortcuts.py.)"""

import logging
import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import FieldError
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Value
from django.db.models.functions import Concat
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.engine.plumbing import database
from delivery.engine.plumbing.database import after_commit, insert, insert_together
from delivery.models import Delivery, Message
from subscriptions.models import Subscription

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




def test_herald_s_statements_are_prepared_and_planned_once_and_django_s_are_not():
    """A bound statement run a few times is prepared on its connection and runs its one generic plan (no planning
    per run: db_config.PLANNED_ONCE); `prepared=False` keeps one planned for its values; Django's own cursor never
    prepares."""
    def run(sql, **kwargs):
        with database.bound_cursor(**kwargs) as cursor:
            cursor.execute(sql, [1])
            return cursor.fetchall()

    for _ in range(4):
        assert run("SELECT %s::int + 40 AS herald_prepared_probe") == [(41,)]
        assert run("SELECT %s::int + 50 AS herald_unprepared_probe", prepared=False) == [(51,)]
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s::int + 60 AS herald_django_probe", [1])
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        prepared = cursor.fetchall()
    probe = [(plans, custom) for statement, plans, custom in prepared if "herald_prepared_probe" in statement]
    assert probe and probe[0][0] >= 1 and probe[0][1] == 0, prepared
    assert not [row for row in prepared if "unprepared_probe" in row[0] or "django_probe" in row[0]], prepared


def test_the_usual_publish_s_insert_is_prepared_and_a_batch_s_is_not(catalog_world):
    """One message and its deliveries, the shape that repeats, is prepared; a batch's, one of many shapes, is bound
    server-side but planned for its run, so batches do not crowd the connection's prepared statements out."""
    owner, _, _, topic = catalog_world
    subscription = Subscription.objects.filter(topic=topic).first()
    now = timezone.now()

    def publish(count: int, subject: str) -> None:
        messages = [Message(topic=topic, payload={"n": n}, published_at=now, fanout_skipped={}, subject=subject)
                    for n in range(count)]
        assert insert_together(messages, [
            Delivery(message=m, subscription=subscription, endpoint_id=subscription.endpoint_id, owner_id=owner.id,
                     status="pending", next_attempt_at=now) for m in messages])

    for _ in range(3):
        publish(1, "one")
        publish(12, "batch")
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s", ["%herald_first%"])
        prepared = [row[0] for row in cursor.fetchall()]
    assert len(prepared) == 1 and "$1" in prepared[0], prepared  # the one-message shape, its values apart from it
    assert database.usual_shape(1, 8) and not database.usual_shape(1, 9) and not database.usual_shape(2, 2)
    assert Message.objects.filter(subject="batch").count() == 36


def test_a_statement_in_a_block_inside_another_s_gets_a_cursor_of_its_own():
    with database.bound_cursor() as outer:
        outer.execute("SELECT generate_series(1, 3)")
        with database.bound_cursor() as inner:
            inner.execute("SELECT 7")
            assert inner.fetchall() == [(7,)]
        assert outer.fetchall() == [(1,), (2,), (3,)]  # its results are still its own


def test_a_prepared_statement_that_no_longer_holds_fails_once_then_runs_on_a_fresh_connection():
    """A migration changed what a prepared statement reads: it fails with the server's error, once; the connection
    is closed, so the next run prepares it anew instead of failing until the connection ages out."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE herald_probe (x int)")
        cursor.execute("INSERT INTO herald_probe VALUES (1)")
    try:
        def read():
            with database.bound_cursor() as cursor:
                cursor.execute("SELECT x FROM herald_probe WHERE x IS NOT NULL OR %s", [True])
                return cursor.fetchall()

        for _ in range(4):
            assert read() == [(1,)]
        params = connection.get_connection_params()  # the migration comes from another process
        with connection.Database.connect(**{k: v for k, v in params.items() if k != "cursor_factory"},
                                         autocommit=True) as other:
            other.execute("ALTER TABLE herald_probe ALTER x TYPE text")
        with pytest.raises(DatabaseError, match="cached plan"):
            read()
        assert connection.connection is None  # closed
        assert read() == [("1",)]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE herald_probe")

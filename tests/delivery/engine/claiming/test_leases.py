"""Claiming (engine/claiming/leases.py): fair across owners and, within an owner, across endpoints. A busy owner's
backlog never stands before a quiet owner's fresh delivery; an owner alone still gets every free slot. Time is
passed in."""

import json
from collections import Counter
from datetime import timedelta

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.claiming import due_work, leases
from delivery.engine.intake.publishing import Entry, message_publish_batch
from delivery.models import Delivery
from tests.delivery.engine.claiming.owners import endpoints_of, flood_messages, owner_with, rows_read

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_quiet_owners_fresh_delivery_goes_with_the_next_claim(django_user_model, redis_conn):
    alice, flood = owner_with(django_user_model, "alice", 2)
    bob, quiet = owner_with(django_user_model, "bob", 1)
    message_publish_batch(topic=flood, entries=[Entry(payload=n) for n in range(100)] * 3)  # 600 due, older
    message_publish_batch(topic=quiet, entries=[Entry(payload="bob")])
    bobs = Delivery.objects.get(owner=bob).id
    now = timezone.now() + timedelta(seconds=1)
    # Oldest first across everyone, Bob's would wait behind all 600 of Alice's.
    oldest_first = list(Delivery.objects.filter(status="pending").order_by("next_attempt_at", "id")
                        .values_list("id", flat=True)[:8])
    assert bobs not in oldest_first

    claimed, more = leases.claim_due(now, 8, per_endpoint=32)

    assert bobs in [d.id for d in claimed] and more
    alices = [d for d in claimed if d.owner_id == alice.id]
    assert len(alices) == 7  # Alice takes every other slot
    assert {d.endpoint_id for d in alices} == set(Delivery.objects.filter(owner=alice)
                                                 .values_list("endpoint_id", flat=True))  # both her endpoints


def test_an_endpoint_without_room_still_counts_as_having_work(django_user_model, redis_conn):
    """Its rows are not read while its sends are in flight; the pump must look again when they complete, not end
    as if nothing were due (with no scheduler running, the rest waited forever)."""
    alice, topic = owner_with(django_user_model, "alice", 1)
    message_publish_batch(topic=topic, entries=[Entry(payload=n) for n in range(10)])
    endpoint = Delivery.objects.first().endpoint_id
    now = timezone.now() + timedelta(seconds=1)
    claimed, more = leases.claim_due(now, 8, per_endpoint=4, in_flight=Counter({endpoint: 4}))
    assert (claimed, more) == ([], True)


def test_an_owner_alone_gets_every_free_slot_oldest_first(django_user_model, redis_conn):
    alice, flood = owner_with(django_user_model, "alice", 1)
    message_publish_batch(topic=flood, entries=[Entry(payload=n) for n in range(50)])
    now = timezone.now() + timedelta(seconds=1)
    claimed, more = leases.claim_due(now, 20, per_endpoint=32)
    expected = list(Delivery.objects.order_by("next_attempt_at", "id").values_list("id", flat=True)[:20])
    assert sorted(d.id for d in claimed) == sorted(expected) and more


def test_every_owner_gets_its_turn_when_there_are_more_owners_than_slots(django_user_model, redis_conn,
                                                                         monkeypatch):
    monkeypatch.setattr(due_work, "SHARES_PER_CLAIM", 3)
    owners = [owner_with(django_user_model, f"o{n}", 1) for n in range(7)]
    for _, topic in owners:
        message_publish_batch(topic=topic, entries=[Entry(payload=n) for n in range(3)])
    now = timezone.now() + timedelta(seconds=1)
    served = set()
    for _ in range(7):
        claimed, _ = leases.claim_due(now, 2, per_endpoint=32)
        served |= {d.owner_id for d in claimed}
    assert served == {user.id for user, _ in owners}


def test_the_lease_and_the_write_back_find_their_rows_by_key_whatever_the_statistics(django_user_model, redis_conn):
    """Among many finished rows the statistics see almost no pending or in-flight ones; the planner then read the
    partial index of every due (or in-flight) row to find the few a statement was after: a cost that grew with the
    backlog. The lease and the write-back must probe the primary key, the look for shares with due rows the share
    index, and the lease the places where the claim's read found its rows."""
    alice, topic = owner_with(django_user_model, "alice", 1)
    subscription = topic.subscriptions.get()
    with connection.cursor() as cursor:
        cursor.execute("""INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type,
                              subject, attributes, published_at, request_fingerprint, fanout_pending, fanout_skipped,
                              broadcast)
                          SELECT gen_random_uuid(), %s, '1', false, 'old', '', '{}', now(), '', false, '{}', false
                          FROM generate_series(1, 20000)""", [topic.id])
        cursor.execute("""INSERT INTO herald_delivery_delivery (message_id, subscription_id, endpoint_id, owner_id,
                              status, attempt_count, dead_letter_reason, budget_attempts, created_at, finished_at)
                          SELECT id, %s, %s, %s, 'succeeded', 1, '', 0, now(), now()
                          FROM herald_delivery_message WHERE event_type = 'old'""",
                       [subscription.id, subscription.endpoint_id, alice.id])
        cursor.execute("ANALYZE herald_delivery_delivery")
    message_publish_batch(topic=topic, entries=[Entry(payload=n) for n in range(100)])
    statements = []

    def capture(execute, sql, params, many, context):
        if sql.lstrip().startswith(("UPDATE", "WITH RECURSIVE", "WITH won AS (UPDATE")):  # (the lease loads too)
            statements.append((sql, params))
        return execute(sql, params, many, context)

    now = timezone.now() + timedelta(seconds=1)
    with connection.execute_wrapper(capture):
        claimed, _ = leases.claim_due(now, 64, per_endpoint=64)
        leases.write_back(claimed, {d.id: {"attempt_count": 1} for d in claimed})
    assert len(claimed) == 64 and len(statements) == 3  # which shares have due rows, the lease, the write-back
    for sql, params in statements:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "delivery_pending_due" not in plan and "delivery_lease" not in plan, plan
        if sql.lstrip().startswith("WITH RECURSIVE"):
            by_key = "delivery_pending_share_due"
        elif "ctid = ANY" in sql:  # the lease goes where the claim's read found its rows
            by_key = "Tid Scan"
        else:
            by_key = "herald_delivery_delivery_pkey"
        assert by_key in plan, plan


def test_a_claim_cut_off_after_its_lease_leaves_its_rows_pending(django_user_model, redis_conn, monkeypatch):
    """The database (or PgBouncer) goes away between the lease and the loads: nothing was sent, so nothing may stay
    in flight under a lease nobody holds (the reconciler would count a lost try and wait a retry delay)."""


    topic, _ = topic_create(owner=django_user_model.objects.create(username="cut"), name="t")
    subscription_create(topic=topic, endpoint="http://127.0.0.1:9/cut")
    Delivery.objects.all().delete()
    message_publish_batch(topic=topic, entries=[Entry(payload=n) for n in range(3)])
    Delivery.objects.update(status="pending", next_attempt_at=timezone.now() - timedelta(seconds=1))

    def gone(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(leases.ENDPOINTS, "loaded", gone)  # after the lease's statement (on PostgreSQL)
    with pytest.raises(OperationalError):
        leases.claim_due(timezone.now(), 10, per_endpoint=10)
    assert set(Delivery.objects.values_list("status", flat=True)) == {"pending"}
    monkeypatch.undo()
    claimed, _ = leases.claim_due(timezone.now(), 10, per_endpoint=10)
    assert len(claimed) == 3 and {d.status for d in claimed} == {"in_flight"}


def test_an_owners_endpoints_take_turns_and_one_alone_gets_every_slot(django_user_model, redis_conn):
    alice = django_user_model.objects.create_user("alice")
    made = endpoints_of(alice, *[f"e{n}" for n in range(6)])
    for topic, _ in made.values():
        message_publish_batch(topic=topic, entries=[Entry(payload=n) for n in range(10)])
    now = timezone.now() + timedelta(seconds=1)
    served = []
    for _ in range(2):  # 3 slots a claim: each endpoint's turn comes
        claimed, more = leases.claim_due(now, 3, per_endpoint=32)
        assert len({d.endpoint_id for d in claimed}) == 3 and more
        served += [d.endpoint_id for d in claimed]
    assert set(served) == {endpoint for _, endpoint in made.values()}

    bob = django_user_model.objects.create_user("bob")
    bobs = endpoints_of(bob, "little", "much")
    message_publish_batch(topic=bobs["little"][0], entries=[Entry(payload="one")])
    message_publish_batch(topic=bobs["much"][0], entries=[Entry(payload=n) for n in range(50)])
    Delivery.objects.filter(owner=alice).delete()
    claimed, more = leases.claim_due(now + timedelta(seconds=1), 20, per_endpoint=32)
    # Split evenly first (10 each), what the first endpoint could not use goes to the one that had more.
    assert Counter(d.endpoint_id for d in claimed) == {bobs["little"][1]: 1, bobs["much"][1]: 19} and more


def test_endpoints_due_later_delay_but_never_hide_one_due_now(django_user_model, redis_conn, monkeypatch):
    """A claim probes a bounded number of endpoints; six whose rows are all due in an hour stand before the one
    due now. Each claim goes on from where the last one stopped, so the due one is reached (starting again from
    the first endpoint every time, it never was)."""
    monkeypatch.setattr(due_work, "ENDPOINTS_SCANNED_PER_WANTED", 2)
    alice = django_user_model.objects.create_user("alice")
    made = endpoints_of(alice, *[f"later{n}" for n in range(6)], "now")
    for topic, _ in made.values():
        message_publish_batch(topic=topic, entries=[Entry(payload=1)])
    now = timezone.now() + timedelta(seconds=1)
    Delivery.objects.exclude(endpoint_id=made["now"][1]).update(next_attempt_at=now + timedelta(hours=1))
    claimed = []
    for _ in range(4):  # two endpoints probed per claim of one slot: the fourth claim reaches it
        taken, more = leases.claim_due(now, 1, per_endpoint=32)
        claimed += taken
        assert more or claimed
    assert [d.endpoint_id for d in claimed] == [made["now"][1]]


def test_a_held_row_with_no_due_time_does_not_end_the_look_at_endpoints(django_user_model, redis_conn):
    """A paused subscription's rows stay pending with no due time. The endpoint holding one comes first in the
    walk; the endpoint after it, with a row due now, must still be found (the missing due time made the walk's
    count NULL, and the walk stopped there)."""
    alice = django_user_model.objects.create_user("alice")
    made = endpoints_of(alice, "held", "due")
    for topic, _ in made.values():
        message_publish_batch(topic=topic, entries=[Entry(payload=1)])
    Delivery.objects.filter(endpoint_id=made["held"][1]).update(next_attempt_at=None)
    claimed, _ = leases.claim_due(timezone.now() + timedelta(seconds=1), 8, per_endpoint=32)
    assert [d.endpoint_id for d in claimed] == [made["due"][1]]


def test_a_share_holding_its_room_of_the_slots_gets_nothing_more_and_a_fresh_share_finds_a_slot(
        django_user_model, redis_conn):
    """Send slots in shares (rules/send_shares.py): Alice's sends hold all but the reserve of the process's slots
    (they are waiting on endpoints that do not answer); Bob's fresh delivery is claimed, none of Alice's."""
    alice, flood = owner_with(django_user_model, "alice", 20)
    bob, quiet = owner_with(django_user_model, "bob", 1)
    message_publish_batch(topic=flood, entries=[Entry(payload=n) for n in range(20)])
    message_publish_batch(topic=quiet, entries=[Entry(payload="bob")])
    now = timezone.now() + timedelta(seconds=1)

    claimed, more = leases.claim_due(now, 64, per_endpoint=32, shares=(Counter({(alice.id, 0): 448}), 512))

    assert [d.owner_id for d in claimed] == [bob.id] and more
    alone, _ = leases.claim_due(now, 64, per_endpoint=32, shares=(Counter({(alice.id, 0): 440}), 512))
    assert len(alone) == 8  # without Bob wanting any, Alice may fill up to all but the reserve


def test_a_claim_loads_each_row_with_what_the_orm_would_load(django_user_model, redis_conn):
    """The claimed rows come with their message, endpoint, subscription and topic as the ORM reads them (every
    column, JSON decoded, times aware); the subscriptions of one topic share its instance."""
    _, topic = owner_with(django_user_model, "loaded", 3)
    topic.delivery_policy = {"healthyRetryPolicy": {"numRetries": 2}}
    topic.save()
    message_publish_batch(topic=topic, entries=[Entry(payload={"n": n}, attributes={"k": "v"}) for n in range(2)])

    claimed = leases.claim(list(Delivery.objects.values_list("id", flat=True)), timezone.now() + timedelta(seconds=1))

    assert len(claimed) == 6
    for delivery in claimed:
        for mine, theirs in [(delivery, Delivery.objects.get(pk=delivery.pk)),
                             (delivery.message, delivery.message.__class__.objects.get(pk=delivery.message_id)),
                             (delivery.endpoint, delivery.endpoint.__class__.objects.get(pk=delivery.endpoint_id)),
                             (delivery.subscription,
                              delivery.subscription.__class__.objects.get(pk=delivery.subscription_id)),
                             (delivery.subscription.topic, topic.__class__.objects.get(pk=topic.pk))]:
            fields = type(theirs)._meta.concrete_fields
            assert [getattr(mine, f.attname) for f in fields] == [getattr(theirs, f.attname) for f in fields]
        assert delivery.message.topic is delivery.subscription.topic
    assert len({id(d.subscription.topic) for d in claimed}) == 1
    assert claimed[0].subscription.topic.delivery_policy == {"healthyRetryPolicy": {"numRetries": 2}}


def test_a_batching_subscriptions_top_up_reads_a_batch_whatever_its_backlog(django_user_model, redis_conn):
    """A claim that takes a row of a batching subscription fills the batch with that subscription's oldest due rows.
    The read went through (subscription, status) and a sort of the subscription's whole backlog with statistics
    taken while the table was empty (117.9 ms at 200,000 rows), or along every due row of every subscription after
    an ANALYZE (221.7 ms, 199,032 rows filtered out): per claim. It must read about a batch, whatever the
    statistics (of the empty table, then two samples of the full one)."""
    alice, topic = owner_with(django_user_model, "alice", 2)
    batching, other = topic.subscriptions.order_by("id")
    batching.max_events_per_batch = 10
    batching.save(update_fields=["max_events_per_batch"])
    table = Delivery._meta.db_table
    plans = []

    def capture(execute, sql, params, many, context):
        if sql.lstrip().startswith("SELECT") and '"subscription_id" = ' in sql:
            raw = context["cursor"].cursor
            raw.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            plans.append(raw.fetchone()[0][0])
        return execute(sql, params, many, context)

    def top_up(now) -> None:
        plans.clear()
        with transaction.atomic(), connection.execute_wrapper(capture):
            claimed, more = leases.claim_due(now, 4, per_endpoint=4)
            transaction.set_rollback(True)  # the rows stay pending for the next statistics
        assert more and sum(d.subscription_id == batching.id for d in claimed) >= 10 and len(plans) == 1
        read = rows_read(plans[0]["Plan"])
        assert read < 200, (read, json.dumps(plans[0], indent=1))  # a batch and the claimed rows, not the backlog

    with connection.cursor() as cursor:
        # empty, as a new install's: what earlier tests left (dead row versions of rolled-back inserts) is vacuumed
        # away first, so that the planner's view of the table is this test's alone
        cursor.execute(f"VACUUM {table}")
        cursor.execute(f"ANALYZE {table}")
        flood_messages(cursor, topic.id, 20000, "now() - interval '1 hour' + g * interval '10 millisecond'")
        # The other subscription's rows fall due first, the batching one's after them.
        cursor.execute(f"""INSERT INTO {table} (message_id, subscription_id, endpoint_id, owner_id, status,
                               next_attempt_at, attempt_count, dead_letter_reason, budget_attempts, created_at)
                           SELECT m.id, s.id, s.endpoint_id, %s, 'pending',
                                  m.published_at + CASE WHEN s.id = %s THEN interval '10 minute' ELSE interval '0'
                                  END, 0, '', 0, now()
                           FROM herald_delivery_message m CROSS JOIN herald_subscriptions_subscription s
                           WHERE m.topic_id = %s AND s.topic_id = %s""",
                       [alice.id, batching.id, topic.id, topic.id])
    now = timezone.now()
    top_up(now)
    for _ in range(2):
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
        top_up(now)

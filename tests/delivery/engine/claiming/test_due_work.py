"""The claim's read (engine/claiming/due_work.py): along the indexes of pending rows, by key or by a bounded range,
so its cost follows the claim and the shares and endpoints with due work, not the backlog; in the turns of
rules/claim_turns.py. Time is passed in."""

from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from delivery.engine.claiming import due_work, leases
from delivery.engine.intake.publishing import Entry, message_publish_batch
from delivery.models import Delivery
from delivery.rules.send_shares import OWN
from tests.delivery.engine.claiming.owners import endpoints_of, flood_messages, owner_with, rows_read

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_owners_are_found_by_index_probes_not_by_reading_the_rows(django_user_model, redis_conn):
    alice, flood = owner_with(django_user_model, "alice", 1)
    message_publish_batch(topic=flood, entries=[Entry(payload=n) for n in range(100)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE herald_delivery_delivery")
    due_work.shares_with_due_work(timezone.now())  # warm
    plan = "\n".join(row[0] for row in _explain(timezone.now()))
    assert "delivery_pending_share_due" in plan, plan


def _explain(now):
    table = Delivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # a 100-row table would be read whole anyway
        cursor.execute(f"""EXPLAIN SELECT owner_id, COALESCE(tenant_id, 0) FROM {table}
                           WHERE status = 'pending' AND (owner_id, COALESCE(tenant_id, 0)) > (0, 0)
                           ORDER BY owner_id, COALESCE(tenant_id, 0), next_attempt_at LIMIT 1""")
        rows = cursor.fetchall()
        cursor.execute("SET enable_seqscan = on")
    return rows


def test_the_claims_reads_stay_on_the_endpoint_index_whatever_the_statistics(django_user_model, redis_conn):
    """A flood of 40,000 deliveries to 20 endpoints, published in batches that share a due time. With statistics
    taken while the table was empty, or after most of the flood was sent, the planner read each endpoint's rows
    through the share index (owner, tenant, due time) and a sort: the share's whole backlog once per endpoint, 17-360
    ms per claim instead of 0.3, and a quiet owner beside the flood waited 0.3-1.3 s for its claims
    (docs/benchmarks.md). Each read must stay on its index's order. (Statistics are a sample: three are tried.)"""
    alice, topic = owner_with(django_user_model, "alice", 20)
    table = Delivery._meta.db_table
    plans = []

    def capture(execute, sql, params, many, context):
        if sql.lstrip().startswith(("SELECT", "WITH")) and "set_config" not in sql:
            # Planned where the claim runs it, with the settings in force there.
            raw = context["cursor"].cursor
            raw.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            plans.append((raw.fetchone()[0][0], sql))
        return execute(sql, params, many, context)

    def reads(now) -> None:
        plans.clear()
        with connection.execute_wrapper(capture):
            rows, more = due_work.due_in_turn(now, 64, 4, Counter())
        assert len(rows) >= 64 and more and len(plans) >= 3
        for plan, sql in plans:
            read = rows_read(plan["Plan"])
            assert read < 200, (read, sql)  # the endpoints' first entries and 80 rows, not thousands per endpoint
            assert "JIT" not in plan, sql  # the priced-out sorts make every plan look dear enough to compile

    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")  # empty
        flood_messages(cursor, topic.id, 2000, "now() - interval '1 minute' + (g / 100) * interval '0.5 second'")
        cursor.execute(f"""INSERT INTO {table} (message_id, subscription_id, endpoint_id, owner_id, status,
                               next_attempt_at, attempt_count, dead_letter_reason, budget_attempts, created_at)
                           SELECT m.id, s.id, s.endpoint_id, %s, 'pending', m.published_at, 0, '', 0, now()
                           FROM herald_delivery_message m CROSS JOIN herald_subscriptions_subscription s
                           WHERE m.topic_id = %s AND s.topic_id = %s ORDER BY m.published_at, s.id""",
                       [alice.id, topic.id, topic.id])
    reads(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(f"""UPDATE {table} SET status = 'succeeded', finished_at = now()
                           WHERE id IN (SELECT id FROM {table} ORDER BY next_attempt_at, id LIMIT 34000)""")
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
        reads(timezone.now())


def test_the_claims_read_plans_leave_a_callers_transaction_as_they_found_it(django_user_model, redis_conn):
    owner_with(django_user_model, "alice", 1)
    settings = "SELECT current_setting('enable_sort'), current_setting('enable_incremental_sort'), " \
        "current_setting('jit')"
    with connection.cursor() as cursor:
        cursor.execute(settings)
        before = cursor.fetchone()
    with transaction.atomic(), connection.cursor() as cursor:
        due_work.due_in_turn(timezone.now(), 8, 4, Counter())
        cursor.execute(settings)
        assert cursor.fetchone() == before
    with connection.cursor() as cursor:
        cursor.execute(settings)
        assert cursor.fetchone() == before


def test_an_endpoint_without_room_is_passed_over_not_read(django_user_model, redis_conn):
    """One owner, two endpoints: the first's 300 due rows are older than the second's one, and the first has no
    room. The claim takes the second's row, and its queries do not read the first's backlog to get there (they
    read it all, filtered, before)."""
    alice = django_user_model.objects.create_user("alice")
    made = endpoints_of(alice, "busy", "quiet")
    message_publish_batch(topic=made["busy"][0], entries=[Entry(payload=n) for n in range(300)])
    message_publish_batch(topic=made["quiet"][0], entries=[Entry(payload="q")])
    busy, quiet = made["busy"][1], made["quiet"][1]
    now = timezone.now() + timedelta(seconds=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE herald_delivery_delivery")
    statements = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        rows, more = due_work.due_in_turn(now, 8, 4, Counter({busy: 4}))
    assert {row[1] for row in rows} == {quiet}
    read = 0
    for sql, params in statements:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            read += rows_read(cursor.fetchone()[0][0]["Plan"])
    assert read < 20, read  # a few probes, not 300 rows

    claimed, _ = leases.claim_due(now, 8, per_endpoint=4, in_flight=Counter({busy: 4}))
    assert [d.endpoint_id for d in claimed] == [quiet]


def test_a_claim_reads_what_its_endpoints_have_room_for(django_user_model, redis_conn):
    """An endpoint with room for 6 more: a claim of 64 slots reads 6 of its 100 due rows (it read 256 to take
    them), oldest first."""
    alice = django_user_model.objects.create_user("alice")
    made = endpoints_of(alice, "one")
    message_publish_batch(topic=made["one"][0], entries=[Entry(payload=n) for n in range(100)])
    endpoint = made["one"][1]
    now = timezone.now() + timedelta(seconds=1)
    rows, more = due_work.due_in_turn(now, 64, 10, Counter({endpoint: 4}))
    oldest = list(Delivery.objects.order_by("next_attempt_at", "id").values_list("id", flat=True)[:6])
    assert [row[0] for row in rows] == oldest and more



def test_the_rows_come_named_and_the_first_owner_rotates_from_claim_to_claim(django_user_model, redis_conn):
    alice, alices = owner_with(django_user_model, "alice", 1)
    bob, bobs = owner_with(django_user_model, "bob", 1)
    message_publish_batch(topic=alices, entries=[Entry(payload=n) for n in range(3)])
    message_publish_batch(topic=bobs, entries=[Entry(payload=n) for n in range(3)])
    now = timezone.now() + timedelta(seconds=1)
    firsts = set()
    for _ in range(2):
        rows, more = due_work.due_in_turn(now, 2, 4, Counter())
        assert len(rows) == 2 and more
        assert {row.owner for row in rows} == {alice.id, bob.id} and {row.tenant for row in rows} == {OWN}
        delivery = Delivery.objects.get(pk=rows[0].id)
        assert (rows[0].endpoint, rows[0].subscription, rows[0].batch) == (
            delivery.endpoint_id, delivery.subscription_id, 1)
        assert rows[0].where  # where the read found it: the lease goes straight there
        firsts.add(rows[0].owner)
    assert firsts == {alice.id, bob.id}


def test_the_cursors_go_on_after_the_last_share_looked_at(django_user_model, redis_conn, monkeypatch):
    monkeypatch.setattr(due_work, "SHARES_PER_CLAIM", 2)
    owners = [owner_with(django_user_model, name, 1) for name in ("a", "b", "c")]
    for _, topic in owners:
        message_publish_batch(topic=topic, entries=[Entry(payload=1)])
    now = timezone.now() + timedelta(seconds=1)
    ids = sorted(user.id for user, _ in owners)
    assert due_work.shares_with_due_work(now) == [(ids[0], OWN), (ids[1], OWN)]
    assert due_work.CURSORS.after_share == (ids[1], OWN)
    assert due_work.shares_with_due_work(now) == [(ids[2], OWN), (ids[0], OWN)]  # then round again


def test_an_empty_claim_moves_no_owners_turn():
    """Empty and full claims alternating (an endpoint without room, say) would otherwise put the same owner first
    in every full one."""
    cursors = due_work.Cursors()
    assert [cursors.turn(["row"]), cursors.turn([]), cursors.turn(["row"]), cursors.turn([]),
            cursors.turn(["row"])] == [0, 0, 1, 0, 2]

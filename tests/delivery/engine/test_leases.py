"""Claiming (delivery/engine/leases.py): fair across owners and, within an owner, across endpoints. A busy owner's
backlog never stands before a quiet owner's fresh delivery; an owner alone still gets every free slot. Time is
passed in."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from delivery.engine import leases
from delivery.engine.publishing import Entry, message_publish_batch
from delivery.engine.subscribing import subscription_create, topic_create
from delivery.models import Delivery

pytestmark = pytest.mark.django_db(transaction=True)


def owner_with(django_user_model, name: str, endpoints: int):
    user = django_user_model.objects.create_user(name)
    topic, _ = topic_create(owner=user, name="t")
    for n in range(endpoints):
        subscription_create(topic=topic, endpoint=f"http://127.0.0.1:9/{name}/{n}")
    return user, topic


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
    from collections import Counter

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
    monkeypatch.setattr(leases, "SHARES_PER_CLAIM", 3)
    owners = [owner_with(django_user_model, f"o{n}", 1) for n in range(7)]
    for _, topic in owners:
        message_publish_batch(topic=topic, entries=[Entry(payload=n) for n in range(3)])
    now = timezone.now() + timedelta(seconds=1)
    served = set()
    for _ in range(7):
        claimed, _ = leases.claim_due(now, 2, per_endpoint=32)
        served |= {d.owner_id for d in claimed}
    assert served == {user.id for user, _ in owners}


def test_the_owners_are_found_by_index_probes_not_by_reading_the_rows(django_user_model, redis_conn):
    alice, flood = owner_with(django_user_model, "alice", 1)
    message_publish_batch(topic=flood, entries=[Entry(payload=n) for n in range(100)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE herald_delivery_delivery")
    leases.shares_with_due_work(timezone.now())  # warm
    plan = "\n".join(row[0] for row in _explain(timezone.now()))
    assert "delivery_pending_share_due" in plan, plan


def _explain(now):
    table = Delivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # a 100-row table would be read whole anyway
        cursor.execute(f"""EXPLAIN SELECT owner_id, COALESCE(tenant_id, 0) FROM {table}
                           WHERE status = 'pending' AND (owner_id, COALESCE(tenant_id, 0)) > (0, 0)
                           ORDER BY owner_id, COALESCE(tenant_id, 0) LIMIT 1""")
        rows = cursor.fetchall()
        cursor.execute("SET enable_seqscan = on")
    return rows

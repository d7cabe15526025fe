"""The door (engine/state/lifecycle.py): the named states, and each change with exactly the follow-ups it owes —
the next of an ordering key released in the same transaction, signals after commit, a pump for rows due now (never
the scheduler), the scheduler for rows due later. Time is passed in; nothing sleeps."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from delivery import signals
from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.intake.publishing import message_publish
from delivery.engine.plumbing.queues import PUMP_WANTED_KEY, WAKE_KEY, WORK_SEQUENCE_KEY
from delivery.engine.state import lifecycle
from delivery.models import Delivery
from delivery.rules.vocabulary import AttemptQueue, DeliveryStatus

pytestmark = pytest.mark.django_db(transaction=True)
NOW = timezone.now()


@pytest.fixture
def subscription(user, redis_conn):
    topic, _ = topic_create(owner=user, name="door")
    created, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/hook",
                                     ordered_delivery=True)
    return created


def publish(subscription, n: int, key: str | None = None) -> int:
    message_publish(topic=subscription.topic, payload={"n": n}, ordering_key=key)
    return Delivery.objects.filter(subscription=subscription).latest("id").id


def asked(redis_conn) -> dict:
    """What the follow-ups left in Redis since the last `forget`: a pump asked for, the scheduler woken."""
    return {"pump": bool(redis_conn.exists(PUMP_WANTED_KEY.format(AttemptQueue.DELIVERIES))),
            "scheduler": bool(redis_conn.llen(WAKE_KEY))}


def forget(redis_conn) -> None:
    redis_conn.delete(PUMP_WANTED_KEY.format(AttemptQueue.DELIVERIES), WAKE_KEY, WORK_SEQUENCE_KEY)


def state(delivery_id: int) -> tuple:
    row = Delivery.objects.get(id=delivery_id)
    return row.status, row.next_attempt_at


def test_the_named_states(subscription):
    first, second = publish(subscription, 0, "k"), publish(subscription, 1, "k")
    held = publish(subscription, 2)
    lifecycle.hold(id=held)
    assert list(lifecycle.waiting().values_list("id", flat=True)) == [second]
    assert list(lifecycle.held().values_list("id", flat=True)) == [held]
    assert list(lifecycle.due(timezone.now()).values_list("id", flat=True)) == [first]
    assert lifecycle.is_waiting(Delivery.objects.get(id=second))
    assert lifecycle.is_held(Delivery.objects.get(id=held))
    assert not lifecycle.is_held(Delivery.objects.get(id=first))
    assert set(lifecycle.not_started().values_list("id", flat=True)) == {first, second, held}
    Delivery.objects.filter(id=first).update(next_attempt_at=NOW + timedelta(hours=1))
    assert list(lifecycle.scheduled(NOW).values_list("id", flat=True)) == [first]


def test_a_new_delivery_is_waiting_held_or_due():
    assert lifecycle.new(due=NOW, behind=True) == {"status": "waiting", "next_attempt_at": None}
    assert lifecycle.new(due=NOW, hold=True) == {"status": "pending", "next_attempt_at": None}
    assert lifecycle.new(due=NOW) == {"status": "pending", "next_attempt_at": NOW}


def test_a_new_delivery_carries_its_subscriptions_endpoint_owner_and_tenant():
    row = lifecycle.new_delivery(None, subscription_id=3, endpoint_id=4, owner_id=5, tenant_id=None, due=NOW,
                                 ordering_key="k", behind=True)
    assert (row.subscription_id, row.endpoint_id, row.owner_id, row.tenant_id, row.ordering_key) == (3, 4, 5, None, "k")
    assert (row.status, row.next_attempt_at, row.replay_id) == ("waiting", None, None)
    held = lifecycle.new_delivery(None, subscription_id=3, endpoint_id=4, owner_id=5, tenant_id=6, due=NOW, hold=True)
    assert (held.tenant_id, held.status, held.next_attempt_at, held.ordering_key) == (6, "pending", None, None)


def test_release_makes_held_rows_due_now_and_asks_a_pump_after_commit(subscription, redis_conn):
    one, two = publish(subscription, 0), publish(subscription, 1)
    lifecycle.hold(subscription=subscription)
    forget(redis_conn)
    with transaction.atomic():
        assert lifecycle.release(now=NOW, id=one) == 1
        assert asked(redis_conn) == {"pump": False, "scheduler": False}  # not before the commit
    assert asked(redis_conn) == {"pump": True, "scheduler": False}
    assert state(one) == ("pending", NOW) and state(two) == ("pending", None)
    assert lifecycle.release(now=NOW, limit=1, subscription=subscription) == 1  # the oldest only
    assert state(two) == ("pending", NOW)


def test_nothing_follows_a_change_that_rolled_back(subscription, redis_conn):
    one = publish(subscription, 0)
    lifecycle.hold(id=one)
    forget(redis_conn)
    with pytest.raises(RuntimeError), transaction.atomic():
        lifecycle.release(now=NOW, id=one)
        raise RuntimeError
    assert asked(redis_conn) == {"pump": False, "scheduler": False}
    assert state(one) == ("pending", None)


def test_settled_releases_the_next_of_a_key_and_announces_after_commit(subscription, redis_conn):
    first, second, third = (publish(subscription, n, "k") for n in range(3))
    heard = []

    def hear(sender, delivery, **kwargs):
        heard.append(delivery.id)

    signals.delivery_succeeded.connect(hear)
    try:
        forget(redis_conn)
        with transaction.atomic():
            Delivery.objects.filter(id=first).update(status=DeliveryStatus.SUCCEEDED, next_attempt_at=None)
            lifecycle.settled({first: {"status": DeliveryStatus.SUCCEEDED}}, keyed=[first], now=NOW)
            assert state(second) == ("pending", NOW)  # in the same transaction
            assert heard == []  # signals wait for the commit
        assert heard == [first]
    finally:
        signals.delivery_succeeded.disconnect(hear)
    assert state(third)[0] == "waiting"
    assert asked(redis_conn) == {"pump": True, "scheduler": False}


def test_settled_wakes_the_scheduler_only_for_rows_due_later(subscription, redis_conn):
    one = publish(subscription, 0)
    forget(redis_conn)
    lifecycle.settled({one: {"status": DeliveryStatus.PENDING, "next_attempt_at": NOW + timedelta(seconds=30)}},
                      now=NOW)
    assert asked(redis_conn) == {"pump": False, "scheduler": True}
    forget(redis_conn)
    lifecycle.settled({one: {"status": DeliveryStatus.PENDING, "next_attempt_at": NOW}}, now=NOW)
    assert asked(redis_conn) == {"pump": True, "scheduler": False}
    forget(redis_conn)
    lifecycle.settled({one: {"status": DeliveryStatus.PENDING, "next_attempt_at": None}}, now=NOW)  # held
    assert asked(redis_conn) == {"pump": False, "scheduler": False}


def test_finish_ends_rows_without_a_try_and_releases_the_next(subscription, redis_conn):
    first, second = publish(subscription, 0, "k"), publish(subscription, 1, "k")
    heard = []

    def hear(sender, delivery, reason, **kwargs):
        heard.append((delivery.id, reason))

    signals.delivery_dead_lettered.connect(hear)
    try:
        ended = lifecycle.end_untried(lifecycle.pending(id=first), DeliveryStatus.DEAD_LETTERED, "manual", now=NOW)
    finally:
        signals.delivery_dead_lettered.disconnect(hear)
    assert ended == [first] and heard == [(first, "manual")]
    row = Delivery.objects.get(id=first)
    assert (row.status, row.dead_letter_reason, row.finished_at, row.next_attempt_at) == (
        "dead_lettered", "manual", NOW, None)
    assert state(second) == ("pending", NOW)
    assert lifecycle.end_untried(lifecycle.pending(id=first), DeliveryStatus.DEAD_LETTERED, "manual", now=NOW) == []


def test_a_new_budget_counts_from_now_and_asks_a_pump(subscription, redis_conn):
    one = publish(subscription, 0)
    Delivery.objects.filter(id=one).update(status=DeliveryStatus.DEAD_LETTERED, attempt_count=4,
                                           dead_letter_reason="max_attempts", finished_at=NOW)
    forget(redis_conn)
    assert lifecycle.new_budget(Delivery.objects.filter(id=one), now=NOW) == 1
    row = Delivery.objects.get(id=one)
    assert (row.status, row.next_attempt_at, row.budget_attempts, row.budget_started_at, row.finished_at,
            row.dead_letter_reason) == ("pending", NOW, 4, NOW, None, "")
    assert asked(redis_conn) == {"pump": True, "scheduler": False}


def test_retry_now_queues_a_job_of_its_own(subscription, redis_conn):
    one = publish(subscription, 0)
    Delivery.objects.filter(id=one).update(next_attempt_at=NOW + timedelta(hours=1))
    forget(redis_conn)
    queue_before = redis_conn.llen("rq:queue:deliveries")
    with transaction.atomic():
        lifecycle.retry_now(Delivery.objects.select_for_update().get(id=one), AttemptQueue.MANUAL, now=NOW)
    assert state(one) == ("pending", NOW)
    assert redis_conn.llen("rq:queue:deliveries") == queue_before + 1


def test_turning_ordering_off_releases_every_waiting_row(subscription, redis_conn):
    ids = [publish(subscription, n, "k") for n in range(3)]
    forget(redis_conn)
    assert lifecycle.release_ordered(subscription.id, now=NOW) == 2
    assert [state(i) for i in ids[1:]] == [("pending", NOW)] * 2
    assert asked(redis_conn)["pump"]


def test_the_safety_net_gives_a_headless_key_its_oldest(subscription, redis_conn):
    ids = [publish(subscription, n, "k") for n in range(3)]
    Delivery.objects.filter(id=ids[0]).update(status=DeliveryStatus.SUCCEEDED)  # finished without the door
    assert lifecycle.release_stranded_keys(now=NOW) == 1
    assert [state(i)[0] for i in ids] == ["succeeded", "pending", "waiting"]
    assert lifecycle.release_stranded_keys(now=NOW) == 0

"""Ordered delivery per key: one at a time, in publish order, each after the previous one finished; keys are
independent; it holds through a worker killed with SIGKILL and a Redis flush."""

import random
import signal
import threading

import pytest

from delivery.engine.accounts import recovery
from delivery.engine.intake.publishing import Entry, message_publish_batch
from delivery.engine.scheduler import dispatch
from delivery.engine.state import lifecycle
from delivery.models import Attempt, Delivery
from subscriptions.models import Subscription, Topic
from tests.conftest import settle, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
QUICK = {"requestPolicy": {"timeoutSeconds": 2}, "retrySchedule": {"delays": [0.2, 0.2]},
         "retryLimits": {"maxAttempts": 3}}


def setup(api, receiver, policy=QUICK, **extra):
    topic = api.post("/api/topics/", {"name": "ledger"}, format="json").json()
    ordered = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/ordered",
                                               "ordered_delivery": True, "delivery_policy": policy, **extra},
                       format="json")
    assert ordered.status_code == 201, ordered.content
    assert ordered.json()["ordered_delivery"] is True
    return topic, ordered.json()


def publish(api, topic, key, n):
    response = api.post(f"/api/topics/{topic['id']}/publish/",
                        {"payload": {"key": key, "n": n}, "ordering_key": key}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["message_id"]


def sequences(requests, path="/hook/ordered"):
    """key → the `n` of each request, in arrival order."""
    seen = {}
    for request in requests:
        if request.path == path:
            data = request.json()["data"]
            seen.setdefault(data["key"], []).append(data["n"])
    return seen


def test_one_key_waits_for_its_head_and_other_keys_do_not(api, receiver, redis_conn):
    failures = {"a": 2}  # a's first message fails twice, then succeeds

    def script(request):
        data = request.json()["data"]
        if request.path.endswith("/ordered") and data["n"] == 0 and failures.get(data["key"], 0) > 0:
            failures[data["key"]] -= 1
            return Reply(status=503)
        return Reply()

    receiver.script = script
    topic, subscription = setup(api, receiver)
    unordered = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/plain"},
                         format="json").json()
    for n in range(3):
        publish(api, topic, "a", n)
        publish(api, topic, "b", n)

    rows = Delivery.objects.filter(subscription_id=subscription["id"])
    assert sorted(rows.values_list("ordering_key", "status")) == [
        ("a", "pending"), ("a", "waiting"), ("a", "waiting"), ("b", "pending"), ("b", "waiting"), ("b", "waiting")]
    assert not Delivery.objects.filter(subscription_id=unordered["id"]).exclude(status="pending").exists()
    assert set(Delivery.objects.filter(subscription_id=unordered["id"]).values_list("ordering_key", flat=True)) == {
        None}

    settle()
    assert sequences(receiver.requests) == {"a": [0, 0, 0, 1, 2], "b": [0, 1, 2]}
    # b was not held back by a's failures: it finished before a's head succeeded
    ordered = [r for r in receiver.requests if r.path.endswith("/ordered")]
    last_b = max(i for i, r in enumerate(ordered) if r.json()["data"]["key"] == "b")
    a_success = [i for i, r in enumerate(ordered) if r.json()["data"] == {"key": "a", "n": 0}][-1]
    assert last_b < a_success
    assert rows.filter(status="succeeded").count() == 6


def test_a_dead_letter_lets_the_next_message_go(api, receiver, redis_conn):
    receiver.script = lambda request: Reply(status=500 if request.json()["data"]["n"] == 0 else 200)
    topic, subscription = setup(api, receiver)
    for n in range(3):
        publish(api, topic, "k", n)
    settle()
    assert sequences(receiver.requests) == {"k": [0, 0, 0, 1, 2]}
    statuses = dict(Delivery.objects.filter(subscription_id=subscription["id"])
                    .values_list("message__payload__n", "status"))
    assert statuses == {0: "dead_lettered", 1: "succeeded", 2: "succeeded"}


def test_stopping_the_head_by_hand_releases_the_next(api, receiver, redis_conn):
    receiver.script = [Reply(status=503)]
    topic, subscription = setup(api, receiver, {"retrySchedule": {"delays": [3600]},
                                                "retryLimits": {"maxAttempts": 5}})
    for n in range(2):
        publish(api, topic, "k", n)
    settle()
    head, second = Delivery.objects.filter(subscription_id=subscription["id"]).order_by("id")
    assert (head.status, second.status) == ("pending", "waiting") and head.attempt_count == 1
    recovery.delivery_dead_letter(delivery=head)  # the admin's "Stop retrying"
    second.refresh_from_db()
    assert second.status == "pending" and second.next_attempt_at is not None


def test_a_batch_publish_keeps_its_order_and_mixes_keys(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver)
    entries = [Entry(payload={"key": key, "n": n}, ordering_key=key) for n in range(4) for key in ("x", "y")]
    message_publish_batch(topic=Topic.objects.get(id=topic["id"]), entries=entries)
    waiting = Delivery.objects.filter(subscription_id=subscription["id"], status="waiting").count()
    assert waiting == 6
    settle()
    assert sequences(receiver.requests) == {"x": [0, 1, 2, 3], "y": [0, 1, 2, 3]}


def test_turning_ordering_off_releases_what_waits(api, receiver, redis_conn):
    receiver.script = [Reply(status=503)]
    topic, subscription = setup(api, receiver, {"retrySchedule": {"delays": [3600]}})
    for n in range(3):
        publish(api, topic, "k", n)
    settle()
    assert Delivery.objects.filter(status="waiting").count() == 2
    response = api.patch(f"/api/subscriptions/{subscription['id']}/", {"ordered_delivery": False}, format="json")
    assert response.status_code == 200
    assert Delivery.objects.filter(status="waiting").count() == 0
    assert Delivery.objects.filter(status="pending", next_attempt_at__isnull=False).count() == 3


def test_the_reconciler_releases_a_key_left_without_a_head(api, receiver):
    topic, subscription = setup(api, receiver)
    for n in range(3):
        publish(api, topic, "k", n)
    rows = list(Delivery.objects.filter(subscription_id=subscription["id"]).order_by("id"))
    # a path that finished the head without releasing the next (what the safety net is for)
    Delivery.objects.filter(id=rows[0].id).update(status="succeeded")
    assert dispatch.reconcile()["ordering_keys"] == 1
    assert list(Delivery.objects.filter(subscription_id=subscription["id"]).order_by("id")
                .values_list("status", flat=True)) == ["succeeded", "pending", "waiting"]
    assert lifecycle.release_stranded_keys() == 0  # the key has its head now


def test_messages_without_a_key_are_not_ordered(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver)
    for n in range(3):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"key": "-", "n": n}}, format="json")
    assert set(Delivery.objects.values_list("status", "ordering_key")) == {("pending", None)}


def test_order_holds_through_a_worker_killed_and_a_redis_flush(api, receiver, processes, redis_conn):
    """Workers run while messages are published through the API; the receiver fails one request in five and
    hangs now and then; one worker is killed with SIGKILL while a request hangs, and Redis is flushed."""
    rng = random.Random(7)
    lock = threading.Lock()
    hung = threading.Event()

    def script(request):
        with lock:
            roll = rng.random()
        if roll < 0.04 and not hung.is_set():
            hung.set()
            return Reply(delay=4)  # the worker holding it is killed meanwhile
        return Reply(status=503 if roll < 0.2 else 200)

    receiver.script = script
    topic, subscription = setup(api, receiver, {"requestPolicy": {"timeoutSeconds": 2},
                                                "retrySchedule": {"delays": [0.1], "repeatLast": True},
                                                "retryLimits": {"maxAttempts": 100}})
    keys, per_key = ("k0", "k1", "k2", "k3"), 25
    victim = processes.worker()  # alone at first, so the hanging request is surely its own
    processes.cron()
    for n in range(per_key):
        for key in keys:
            publish(api, topic, key, n)
        if n == 5:
            wait_until(hung.is_set, timeout=30)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            processes.worker()
        if n == 12:
            redis_conn.flushall()
            processes.worker()

    total = len(keys) * per_key
    try:
        wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == total, timeout=60)
    except AssertionError:
        rows = Delivery.objects.exclude(status="succeeded").order_by("id").values_list(
            "id", "ordering_key", "status", "attempt_count", "next_attempt_at", "lease_until")
        raise AssertionError(f"not delivered: {list(rows)}") from None
    assert Attempt.objects.filter(error_class="lease_expired").exists()  # the kill hit a send in flight
    got = sequences(receiver.requests)
    assert set(got) == set(keys)
    for key, ns in got.items():
        assert ns == sorted(ns), f"{key} arrived out of order: {ns}"
        assert sorted(set(ns)) == list(range(per_key))
    assert Subscription.objects.get(id=subscription["id"]).deliveries.filter(status="waiting").count() == 0

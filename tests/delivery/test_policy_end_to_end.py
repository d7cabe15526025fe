"""Policies through real workers, the real scheduler and a real receiver."""


from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.sending import attempts
from delivery.models import Attempt, Delivery
from tests.conftest import publish, settle, subscribe, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
TOLERANCE = 0.5  # seconds late at most, on a loaded 2-core machine
# The receiver runs in the test process and notes each arrival when its thread gets to it: with both cores busy
# that note can come this much after the request arrived, so a 1 s window is checked as 1 s less this.
ARRIVAL_JITTER = 0.15




def test_retries_arrive_at_their_scheduled_offsets_never_early(api, receiver, processes):
    receiver.script = [Reply(status=500), Reply(status=502), Reply(status=503), Reply(status=200)]
    delays = [1, 2, 3]
    topic, _ = subscribe(api, receiver, {"retrySchedule": {"delays": delays}, "retryLimits": {"maxAttempts": 4}})
    processes.worker()
    processes.cron()

    publish(api, topic)
    requests = receiver.wait_for(4, timeout=30)

    gaps = [later.at - earlier.at for earlier, later in zip(requests, requests[1:], strict=False)]
    print("retry gaps (s):", [round(g, 3) for g in gaps])
    for gap, delay in zip(gaps, delays, strict=True):
        assert delay <= gap < delay + TOLERANCE, (gaps, delays)
    wait_until(lambda: Delivery.objects.filter(status="succeeded").exists())
    assert list(Attempt.objects.order_by("number").values_list("queue", flat=True)) == [
        "deliveries", "retries", "retries", "retries"]


def test_throttle_holds_in_every_one_second_window_across_two_workers(api, receiver, processes):
    topic, _ = subscribe(api, receiver, {"throttlePolicy": {"maxReceivesPerSecond": 5}})
    processes.worker()
    processes.worker()
    processes.cron()

    for n in range(20):
        publish(api, topic, n)
    requests = receiver.wait_for(20, timeout=30)

    arrivals = sorted(request.at for request in requests)
    for index, start in enumerate(arrivals):
        in_window = [t for t in arrivals[index:] if t < start + 1.0 - ARRIVAL_JITTER]
        assert len(in_window) <= 5, f"{len(in_window)} requests within 1 s from {start}"
    assert {r.json()["data"] for r in requests} == set(range(20))
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    assert max(gaps) < 1.0 + TOLERANCE, gaps  # throttled, not stalled: a deferred send goes when its slot frees
    assert set(Attempt.objects.values_list("number", flat=True)) == {1}  # a deferral is not an attempt


@pytest.mark.parametrize("status", [429, 502, 504])  # Standard Webhooks' throttling statuses
def test_retry_after_is_honoured(api, receiver, processes, status):
    receiver.script = [Reply(status=status, headers={"Retry-After": "2"}), Reply(status=200)]
    topic, _ = subscribe(api, receiver, {"retrySchedule": {"delays": [0.2]}, "retryLimits": {"maxAttempts": 3}})
    processes.worker()
    processes.cron()

    publish(api, topic)
    first, second = receiver.wait_for(2, timeout=20)

    assert 2.0 <= second.at - first.at < 2.0 + TOLERANCE


@pytest.mark.parametrize("policy, reply, status, reason, attempts", [
    ({"retrySchedule": {"delays": [0.1]}, "retryLimits": {"maxAttempts": 2}}, Reply(status=500),
     "dead_lettered", "max_attempts", 2),
    ({"retrySchedule": {"delays": [5]}, "retryLimits": {"maxAgeSeconds": 1}}, Reply(status=500),
     "dead_lettered", "ttl_expired", 1),
    ({"preset": "event-grid"}, Reply(status=400), "dead_lettered", "permanent_failure", 1),
    ({"preset": "workfront"}, Reply(status=410), "dead_lettered", "permanent_failure", 1),
    ({"retrySchedule": {"delays": [0.1]}, "retryLimits": {"maxAttempts": 2}, "redrivePolicy": {"deadLetter": False}},
     Reply(status=500), "dropped", "max_attempts", 2),
])
def test_dead_letter_reasons_and_drop(api, receiver, run_worker, policy, reply, status, reason, attempts):
    receiver.script = [reply]
    topic, _ = subscribe(api, receiver, policy)
    publish(api, topic)

    settle()

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.dead_letter_reason, delivery.attempt_count) == (status, reason, attempts)
    assert len(receiver.requests) == attempts


def test_held_delivery_past_its_time_to_live_is_dead_lettered_without_sending(api, receiver, run_worker):
    topic, _ = subscribe(api, receiver, {"retrySchedule": {"delays": [1]}, "retryLimits": {"maxAgeSeconds": 1}})
    publish(api, topic)
    later = timezone.now() + timedelta(seconds=1.1)  # it outlives its time-to-live before any worker picks it up

    attempts.process([Delivery.objects.get().id], "deliveries", now=later)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.dead_letter_reason, delivery.attempt_count) == ("dead_lettered",
                                                                                       "ttl_expired", 0)
    assert receiver.requests == []


def test_two_schedulers_never_double_send_or_send_early(api, receiver, processes):
    receiver.script = lambda request: Reply(status=500 if request.headers["herald-attempt"] == "1" else 200)
    topic, _ = subscribe(api, receiver, {"retrySchedule": {"delays": [1]}, "retryLimits": {"maxAttempts": 3}})
    processes.worker()
    processes.cron()
    processes.cron()
    for n in range(10):
        publish(api, topic, n)

    requests = receiver.wait_for(20, timeout=30)
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 10)

    assert len(receiver.requests) == 20  # one failure and one success per message, nothing twice
    assert Attempt.objects.count() == 20 and not Delivery.objects.exclude(status="succeeded").exists()
    by_message = {}
    for request in requests:
        by_message.setdefault(request.headers["webhook-id"], []).append(request.at)
    assert all(len(times) == 2 and times[1] - times[0] >= 1.0 for times in by_message.values())

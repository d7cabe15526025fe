"""At-least-once under failure: a worker killed mid-send, and a Redis that lost its jobs."""

import signal

import pytest

from delivery.models import Delivery
from tests.conftest import subscribe, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
FAST_LEASE = {"requestPolicy": {"timeoutSeconds": 2}, "retrySchedule": {"delays": [1]},
              "retryLimits": {"maxAttempts": 5}}



def all_succeeded(count):
    return lambda: Delivery.objects.filter(status="succeeded").count() == count


def test_worker_killed_mid_delivery_is_redelivered_after_its_lease_expires(api, receiver, processes):
    # The first request hangs long enough for us to kill the worker while it waits for the answer.
    receiver.script = lambda request: Reply(delay=30 if len(receiver.requests) == 1 else 0)
    topic, _ = subscribe(api, receiver, FAST_LEASE, name="crash")
    for n in range(5):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"n": n}}, format="json")

    worker = processes.worker()
    receiver.wait_for(1)
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    stuck = Delivery.objects.filter(status="in_flight")
    assert stuck.exists()  # the killed worker left its claim behind

    processes.worker()
    processes.cron()
    wait_until(all_succeeded(5), timeout=40)

    delivered = {request.json()["data"]["n"] for request in receiver.requests}
    assert delivered == {0, 1, 2, 3, 4}


def test_flushed_redis_loses_no_delivery(api, receiver, processes, redis_conn):
    topic, _ = subscribe(api, receiver, FAST_LEASE, name="crash")
    for n in range(20):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"n": n}}, format="json")
    assert redis_conn.llen("rq:queue:deliveries") > 0

    redis_conn.flushall()  # every queued job is gone

    processes.worker()
    processes.cron()
    wait_until(all_succeeded(20), timeout=40)
    assert {request.json()["data"]["n"] for request in receiver.requests} == set(range(20))

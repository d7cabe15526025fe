"""Endpoint health through real workers, the real scheduler and a real receiver."""

import logging
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.engine.scheduler import dispatch
from delivery.engine.state import health
from delivery.models import Attempt, Delivery
from subscriptions.models import Endpoint, EndpointTransition, EndpointWindowBucket
from tests.conftest import publish, subscribe, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
LOW_THRESHOLDS = {"HERALD_DISABLE_MIN_ATTEMPTS": 3, "HERALD_DISABLE_FAILURE_RATE": 0.5,
                  "HERALD_PROBE_INTERVAL_SECONDS": 2}
KEEP_TRYING = {"retrySchedule": {"delays": [0.3], "repeatLast": True}, "retryLimits": {"maxAgeSeconds": 300}}


def test_concurrent_failures_are_all_counted(api, receiver, processes):
    receiver.script = [Reply(status=500, delay=0.01)]
    topic, subscription = subscribe(api, receiver, {"retrySchedule": {"delays": [1]},
                                                    "retryLimits": {"maxAttempts": 1}})
    processes.worker(HERALD_MAX_IN_FLIGHT_PER_ENDPOINT=2)  # small claims, so both workers fail at the same moments
    processes.worker(HERALD_MAX_IN_FLIGHT_PER_ENDPOINT=2)
    processes.cron()
    for n in range(40):
        publish(api, topic, n)

    wait_until(lambda: Delivery.objects.filter(status="dead_lettered").count() == 40, timeout=40)
    # a worker writes its rows, then (in a transaction of its own) its endpoint's counters: wait for those too
    endpoint_id = subscription["endpoint_id"]
    wait_until(lambda: Endpoint.objects.get(id=endpoint_id).window_attempts >= 40, timeout=20)

    assert len({a.number for a in Attempt.objects.all()}) == 1 and Attempt.objects.count() == 40
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    assert endpoint.consecutive_failures == 40, sorted(Attempt.objects.values_list("error_class", flat=True))
    assert endpoint.window_attempts == 40 and endpoint.window_failures == 40
    assert health.window_totals(endpoint.id, endpoint.last_failure_at) == (40, 40)
    assert endpoint.state == "active"  # the default thresholds are far away


def test_failing_endpoint_is_disabled_probed_once_per_interval_and_recovers(api, receiver, processes, settings):
    healthy = threading.Event()
    receiver.script = lambda request: Reply(status=200 if healthy.is_set() else 500)
    topic, subscription = subscribe(api, receiver, KEEP_TRYING, name="health")
    processes.worker(**LOW_THRESHOLDS)
    processes.cron(**LOW_THRESHOLDS)
    for n in range(6):
        publish(api, topic, n)

    endpoint_id = subscription["endpoint_id"]
    wait_until(lambda: Endpoint.objects.get(id=endpoint_id).state == "disabled", timeout=20)
    disabled_at = time.time()
    attempts_when_disabled = len(receiver.requests)
    wait_until(lambda: len(receiver.requests) >= attempts_when_disabled + 3, timeout=15)  # three probes
    probes = [r.at for r in receiver.requests[attempts_when_disabled:]]
    assert len(probes) >= 3, probes
    gaps = [b - a for a, b in zip(probes, probes[1:], strict=False)]
    assert all(gap >= 2.0 for gap in gaps), gaps
    disabled_moment = Endpoint.objects.get(id=endpoint_id).state_changed_at.timestamp()
    assert probes[0] >= disabled_moment + 2.0  # the first probe waits a whole interval
    assert set(Attempt.objects.filter(number__gt=1, queue="probe").values_list("outcome", flat=True)) == {
        "retryable_failure"}

    healthy.set()
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 6, timeout=20)
    delivered = {r.json()["data"] for r in receiver.requests if r.at > disabled_at and healthy.is_set()}
    assert delivered <= set(range(6))
    states = list(EndpointTransition.objects.filter(endpoint_id=endpoint_id).order_by("at", "id")
                  .values_list("from_state", "to_state"))
    assert states == [("active", "disabled"), ("disabled", "active")]
    detail = api.get(f"/api/endpoints/{endpoint_id}/").json()
    assert detail["state"] == "active"
    assert [t["to_state"] for t in detail["transitions"]] == ["active", "disabled"]


def test_held_deliveries_keep_their_time_to_live(api, receiver, run_worker):
    """The time-to-live runs from the publish, whatever the machine's load: the test passes the time."""
    topic, subscription = subscribe(api, receiver, {"retrySchedule": {"delays": [1]},
                                                    "retryLimits": {"maxAgeSeconds": 60}})
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    health.endpoint_freeze(endpoint=endpoint)
    publish(api, topic, 1)
    run_worker()
    held = Delivery.objects.select_related("message").get()
    assert held.next_attempt_at is None  # held, not sent

    published = held.message.published_at
    assert dispatch.expire_held(published + timedelta(seconds=59)) == 0
    assert dispatch.expire_held(published + timedelta(seconds=61)) == 1

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.dead_letter_reason, delivery.attempt_count) == ("dead_lettered",
                                                                                       "endpoint_frozen", 0)
    assert receiver.requests == []


def test_admin_actions_call_the_services(admin_client, api, receiver):
    _, subscription = subscribe(api, receiver, None)
    endpoint_id = subscription["endpoint_id"]
    url = "/admin/herald_subscriptions/endpoint/"
    for action, state in [("freeze", "frozen"), ("enable", "active"), ("disable", "disabled"), ("enable", "active")]:
        response = admin_client.post(url, {"action": action, "_selected_action": [endpoint_id]})
        assert response.status_code == 302
        assert Endpoint.objects.get(id=endpoint_id).state == state
    assert EndpointTransition.objects.filter(endpoint_id=endpoint_id).count() == 4
    page = admin_client.get(f"{url}{endpoint_id}/change/").content.decode()
    assert "frozen by hand" in page and "enabled by hand" in page


def test_the_rate_window_rolls_bucket_by_bucket(api, receiver, settings):
    settings.HERALD_RATE_WINDOW_SECONDS = 240  # 24 buckets of 10 s
    _, subscription = subscribe(api, receiver, None)
    endpoint_id = subscription["endpoint_id"]
    start = timezone.now()
    health.record_results(endpoint_id, [False, False], start)
    health.record_results(endpoint_id, [True], start + timedelta(seconds=120))

    assert health.window_totals(endpoint_id, start + timedelta(seconds=125)) == (3, 2)
    assert health.window_totals(endpoint_id, start + timedelta(seconds=245)) == (1, 0)  # the first bucket left
    assert health.window_totals(endpoint_id, start + timedelta(seconds=365)) == (0, 0)


def test_concurrent_write_backs_of_failures_count_exactly(api, receiver):
    """Eight workers' write-backs of failures to one endpoint at once, fifty each: every count is there, in the
    consecutive failures and in the window (an evaluation reading the window's totals could write them back over a
    count that came in meanwhile)."""
    _, subscription = subscribe(api, receiver, None)
    endpoint_id = subscription["endpoint_id"]
    start = threading.Barrier(8)
    errors = []

    def worker():
        try:
            start.wait()
            for _ in range(50):
                health.record_results(endpoint_id, [False], timezone.now())
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    endpoint = Endpoint.objects.get(id=endpoint_id)
    assert (endpoint.consecutive_failures, endpoint.window_attempts, endpoint.window_failures) == (400, 400, 400)
    assert health.window_totals(endpoint_id, timezone.now()) == (400, 400)


def test_a_group_of_results_moves_each_counter_as_its_outcomes_say(django_user_model, settings):
    """A group's results in order: the failures after its last success are the consecutive ones; a group without
    a success adds to them; each time is set only by a result of its kind."""
    settings.HERALD_DISABLE_MIN_ATTEMPTS = 1000  # no transition here: the counters only
    owner = django_user_model.objects.create(username="counted")
    endpoint = Endpoint.objects.create(owner=owner, url="https://example.com/counted")
    t0 = timezone.now()
    steps = [([True, False, False], t0, (2, 3, 2), t0, t0),
             ([False, False], t0 + timedelta(seconds=1), (4, 5, 4), t0, t0 + timedelta(seconds=1)),
             ([True, True], t0 + timedelta(seconds=2), (0, 7, 4), t0 + timedelta(seconds=2), t0 + timedelta(seconds=1))]
    for outcomes, now, counters, success_at, failure_at in steps:
        health.record_results(endpoint.id, outcomes, now)
        endpoint.refresh_from_db()
        assert (endpoint.consecutive_failures, endpoint.window_attempts, endpoint.window_failures) == counters
        assert (endpoint.last_success_at, endpoint.last_failure_at) == (success_at, failure_at)
    assert health.window_totals(endpoint.id, t0 + timedelta(seconds=2)) == (7, 4)


def test_several_endpoints_are_counted_in_one_statement_as_one_by_one_would(django_user_model, settings):
    """A group's results for several endpoints: one statement (PostgreSQL) moves each endpoint's counters and
    window exactly as counting it alone does; an endpoint deleted meanwhile is skipped, not an error."""
    settings.HERALD_DISABLE_MIN_ATTEMPTS = 1000
    owner = django_user_model.objects.create(username="many")
    together = [Endpoint.objects.create(owner=owner, url=f"https://example.com/t{n}") for n in range(4)]
    alone = [Endpoint.objects.create(owner=owner, url=f"https://example.com/a{n}") for n in range(4)]
    shapes = [[True, False, False], [False, False], [True, True], [False, True]]  # each of _count's four shapes
    t0 = timezone.now()
    for step in range(3):  # the second and third add to counters and buckets already there
        now = t0 + timedelta(seconds=step)
        with CaptureQueriesContext(connection) as queries:
            health.count_results({endpoint.id: shape for endpoint, shape in zip(together, shapes, strict=True)}, now)
        if connection.vendor == "postgresql":
            assert len(queries) == 1
        health.count_results({together[0].id: [], 10**12: [False]}, now)  # nothing to count; no such endpoint
        for endpoint, shape in zip(alone, shapes, strict=True):
            health.record_results(endpoint.id, shape, now)
    fields = ("consecutive_failures", "window_attempts", "window_failures", "last_success_at", "last_failure_at")
    for mine, reference in zip(together, alone, strict=True):
        mine.refresh_from_db()
        reference.refresh_from_db()
        assert [getattr(mine, name) for name in fields] == [getattr(reference, name) for name in fields]
        assert health.window_totals(mine.id, t0) == health.window_totals(reference.id, t0) != (0, 0)
    assert not EndpointWindowBucket.objects.filter(endpoint_id=10**12).exists()


def test_workers_counting_the_same_endpoints_in_any_order_count_exactly_and_never_deadlock(django_user_model,
                                                                                           caplog):
    """Eight workers each counting results for the same six endpoints at once, fifty times, some naming them in
    the opposite order: every count is there, and no statement failed (a deadlock would have been counted again
    one endpoint at a time, with a warning)."""
    owner = django_user_model.objects.create(username="racing")
    endpoints = [Endpoint.objects.create(owner=owner, url=f"https://example.com/r{n}").id for n in range(6)]
    start = threading.Barrier(8)
    errors = []

    def worker(order):
        try:
            start.wait()
            for _ in range(50):
                health.count_results({endpoint_id: [False] for endpoint_id in order}, timezone.now())
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(endpoints if n % 2 else endpoints[::-1],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("delivery")]
    for endpoint in Endpoint.objects.filter(id__in=endpoints):
        assert (endpoint.consecutive_failures, endpoint.window_attempts, endpoint.window_failures) == (400, 400, 400)


def test_one_endpoint_whose_counters_cannot_move_does_not_stop_the_others(django_user_model, caplog):
    """The statement for every endpoint fails when one endpoint's counter would overflow: each is then counted on
    its own, and only that one is left out (and logged)."""
    owner = django_user_model.objects.create(username="overflow")
    full = Endpoint.objects.create(owner=owner, url="https://example.com/full", window_attempts=2**31 - 1)
    fine = Endpoint.objects.create(owner=owner, url="https://example.com/fine")
    health.count_results({full.id: [True], fine.id: [False, True]}, timezone.now())

    fine.refresh_from_db()
    full.refresh_from_db()
    assert (fine.window_attempts, fine.window_failures, fine.consecutive_failures) == (2, 1, 0)
    assert full.window_attempts == 2**31 - 1 and full.last_success_at is None
    assert f"endpoint {full.id}: its health counters could not be updated" in caplog.text


def test_an_endpoint_whose_row_is_held_waits_alone(django_user_model):
    """While another transaction holds one endpoint's row (a transition releasing its held deliveries), counting a
    group counts the free endpoints at once and waits only for that one: it holds no other endpoint meanwhile."""
    owner = django_user_model.objects.create(username="held")
    held, free = (Endpoint.objects.create(owner=owner, url=f"https://example.com/{n}").id for n in ("held", "free"))
    db = connection.settings_dict
    holder = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"])
    holder.execute(f"SELECT 1 FROM {Endpoint._meta.db_table} WHERE id = %s FOR NO KEY UPDATE", [held])
    counting = threading.Thread(target=lambda: (health.count_results({held: [False], free: [False]},
                                                                     timezone.now()), connection.close()))
    counting.start()
    try:
        wait_until(lambda: Endpoint.objects.get(id=free).window_attempts == 1, timeout=10)
        assert counting.is_alive() and Endpoint.objects.get(id=held).window_attempts == 0
        with connection.cursor() as cursor:  # the free endpoint's row is not held by the waiting count
            cursor.execute(f"SELECT id FROM {Endpoint._meta.db_table} WHERE id = %s FOR NO KEY UPDATE NOWAIT", [free])
    finally:
        holder.rollback()
        holder.close()
    counting.join(10)
    assert not counting.is_alive()
    assert [Endpoint.objects.get(id=i).window_attempts for i in (held, free)] == [1, 1]

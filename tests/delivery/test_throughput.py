"""The pull engine's guarantees at scale (the figures themselves are in bench/ and docs/benchmarks.md):
no head-of-line blocking, several workers and schedulers on one database, a due-work query that reads a batch."""

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from delivery.models import Attempt, Delivery
from delivery.rules.vocabulary import DeliveryStatus
from tests.conftest import publish, subscribe, wait_until
from tests.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hanging():
    server = Receiver()
    server.script = lambda request: Reply(delay=20)
    yield server
    server.close()


def test_a_hanging_endpoint_does_not_hold_back_anyone_else(api, receiver, hanging, processes):
    stuck_topic, _ = subscribe(api, hanging, {"requestPolicy": {"timeoutSeconds": 15},
                                              "retryLimits": {"maxAttempts": 1}}, name="stuck")
    fast_topic, _ = subscribe(api, receiver, name="fast")
    for n in range(3):
        publish(api, stuck_topic, n)  # published first: the oldest due work
    processes.worker()
    hanging.wait_for(3)
    for n in range(30):
        publish(api, fast_topic, n)

    wait_until(lambda: Delivery.objects.filter(subscription__topic__name="fast", status="succeeded").count() == 30)

    # Everything else went out and was recorded while the hanging endpoint still held its three sends.
    assert Delivery.objects.filter(subscription__topic__name="stuck", status="in_flight").count() == 3
    assert not Attempt.objects.filter(delivery__subscription__topic__name="stuck").exists()


def test_an_answering_endpoint_has_its_next_round_claimed_ahead_and_never_more_than_its_room(api, receiver,
                                                                                             processes):
    """A worker claims the next round of an endpoint that answers 2xx while the current one is in flight (the rows
    wait in its transport for a slot), so the endpoint always has its room of requests in flight, and never more."""
    lock, in_flight, most = threading.Lock(), [0], [0]

    def slow(received):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.3)
        with lock:
            in_flight[0] -= 1
        return Reply()

    receiver.script = slow
    topic, _ = subscribe(api, receiver)
    for n in range(24):
        publish(api, topic, n)
    processes.worker(HERALD_MAX_IN_FLIGHT_PER_ENDPOINT=3)
    leased = []

    def done():
        leased.append(Delivery.objects.filter(status="in_flight").count())
        return Delivery.objects.filter(status="succeeded").count() == 24

    wait_until(done, timeout=40)
    assert most[0] == 3  # its room, used and never passed
    # While it drains, a round is claimed ahead (leased, waiting for the room) most of the time, not only in the
    # moment between a claim and the write-back of the answers it refilled.
    draining = [n for n in leased if n]
    assert sum(n > 3 for n in draining) > len(draining) / 2, leased


def test_four_workers_and_two_schedulers_keep_every_guarantee(api, receiver, other_receiver, processes):
    """Retries, attempt numbering and single sends hold with more workers and schedulers than the Procfile's."""
    answers = Counter()

    def flaky(request):  # every third message's first try fails (not enough to disable the endpoint)
        answers[request.headers["webhook-id"]] += 1
        first = answers[request.headers["webhook-id"]] == 1
        return Reply(status=500 if first and request.json()["data"] % 3 == 0 else 200)

    other_receiver.script = flaky
    steady, _ = subscribe(api, receiver, name="steady")
    policy = {"retrySchedule": {"delays": [1]}, "retryLimits": {"maxAttempts": 3, "maxAgeSeconds": 3600}}
    retried, _ = subscribe(api, other_receiver, policy, name="retried")
    for _ in range(4):
        processes.worker()
    processes.cron()
    processes.cron()
    for n in range(150):
        publish(api, steady, n)
        publish(api, retried, n)

    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 300, timeout=90)

    sends = [(r.headers["webhook-id"], r.headers["herald-attempt"])
             for r in receiver.requests + other_receiver.requests]
    assert len(sends) == len(set(sends)) == 350  # no try sent twice: 150 + 150 + 50 retries
    assert Attempt.objects.count() == 350
    retried_counts = Counter(Delivery.objects.filter(subscription__topic__name="retried")
                             .values_list("attempt_count", flat=True))
    assert retried_counts == {1: 100, 2: 50}


def test_the_due_work_query_reads_a_batch_whatever_the_backlog(three):
    """50,000 pending rows not yet due: the claim's query walks the partial index and stops at the batch."""
    delivery = Delivery.objects.select_related("message", "subscription").get(id=three[0])
    later = timezone.now() + timedelta(hours=1)
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type, subject,
                                             attributes,
                                             published_at, request_fingerprint, fanout_pending)
               SELECT gen_random_uuid(), %s, '1', false, 'bench', '', '{}', now(), '', false
               FROM generate_series(1, 50000)""", [delivery.message.topic_id])
        cursor.execute(
            """INSERT INTO herald_delivery_delivery (message_id, subscription_id, endpoint_id, owner_id, status,
                                              next_attempt_at, attempt_count, budget_attempts, dead_letter_reason,
                                              created_at)
               SELECT m.id, %s, %s, %s, 'pending', %s, 0, 0, '', now()
               FROM herald_delivery_message m WHERE m.event_type = 'bench'""",
            [delivery.subscription_id, delivery.endpoint_id, delivery.owner_id, later])
        cursor.execute("ANALYZE herald_delivery_delivery")
    due = (Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=timezone.now())
           .exclude(endpoint_id__in=[]).order_by("next_attempt_at").values_list("id", "endpoint_id")[:1024])

    plan = due.explain(analyze=True)

    assert "delivery_pending_due" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert len(list(due)) == 3

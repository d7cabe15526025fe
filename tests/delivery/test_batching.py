"""Batched delivery (Event Grid output batching): a subscription's due events go out as CloudEvents batches, signed
as one request, succeeding or failing together; retries, dead letters and attempts count events."""

import json
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook

from delivery.models import Attempt, Delivery, Exchange
from delivery.rules import wire
from delivery.rules.batching import cut
from subscriptions.models import Endpoint, Subscription
from tests.conftest import settle
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_cut_by_count_and_preferred_size():
    assert cut(list("abcdefg"), [10] * 7, max_events=3, preferred_bytes=10_000) == [
        ["a", "b", "c"], ["d", "e", "f"], ["g"]]
    # "[" + 30 + "," + 30 + "," + 30 + "]" is 94 bytes: 3 of 30 fit in 100, the fourth would pass it
    assert cut(list("abcde"), [30] * 5, max_events=100, preferred_bytes=100) == [["a", "b", "c"], ["d", "e"]]
    assert cut(list("ab"), [49, 49], max_events=100, preferred_bytes=100) == [["a"], ["b"]]  # 101 bytes together
    # an event larger than the preferred size on its own still goes, alone
    assert cut(list("abc"), [10, 500, 10], max_events=100, preferred_bytes=100) == [["a"], ["b"], ["c"]]
    assert cut([], [], max_events=5, preferred_bytes=100) == []


def envelope(n, **changes):
    values = dict(message_id=f"m{n}", topic_name="orders", event_type="order.created", subject="",
                  published_at=datetime(2026, 1, 1, tzinfo=UTC), payload={"n": n}, payload_is_text=False,
                  subscription_id=7, url="https://example.com/hook", raw=False, secrets=(SECRET,),
                  extra_headers={"X-Static": "s", "X-Tenant": f"t{n % 2}"})
    values.update(changes)
    return wire.Envelope(**values)


def test_a_batch_is_a_cloudevents_array_signed_as_one_request():
    envelopes = [envelope(n) for n in range(3)]
    now = datetime.now(UTC)
    request = wire.build_batch_request(envelopes, attempt_number=2, now=now)
    assert request.headers["Content-Type"] == "application/cloudevents-batch+json; charset=utf-8"
    events = json.loads(request.body)
    assert [event["id"] for event in events] == ["m0", "m1", "m2"]
    assert all(event["specversion"] == "1.0" and event["type"] == "order.created" for event in events)
    assert request.headers["herald-batch-size"] == "3" and request.headers["herald-attempt"] == "2"
    # the independent Standard Webhooks implementation verifies the whole body
    Webhook(SECRET).verify(request.body, {k: v for k, v in request.headers.items() if k.startswith("webhook-")})
    # the same members keep the batch's id; headers from attributes go along only where every event agrees
    again = wire.build_batch_request(envelopes, attempt_number=3, now=now)
    assert again.headers["webhook-id"] == request.headers["webhook-id"] != "m0"
    assert request.headers["X-Static"] == "s" and "X-Tenant" not in request.headers


def setup(api, receiver, batch=10, **extra):
    topic = api.post("/api/topics/", {"name": "bulk"}, format="json").json()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                               "max_events_per_batch": batch, **extra}, format="json")
    assert created.status_code == 201, created.content
    subscription = created.json()
    assert subscription["max_events_per_batch"] == batch
    return topic, subscription


def publish_all(api, topic, subscription, count, payload=lambda n: {"n": n}):
    """Publish while the subscription is paused, so every event is due when it resumes (a backlog)."""
    Subscription.objects.filter(id=subscription["id"]).update(status="paused")
    for n in range(count):
        response = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": payload(n)}, format="json")
        assert response.status_code == 202
    assert api.post(f"/api/subscriptions/{subscription['id']}/resume/").status_code == 200


def test_a_backlog_goes_out_in_batches_and_every_event_is_counted(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver, batch=10)
    publish_all(api, topic, subscription, 25)
    settle()
    assert len(receiver.requests) == 3
    sizes = sorted(len(r.json()) for r in receiver.requests)
    assert sizes == [5, 10, 10]
    for request in receiver.requests:
        assert request.headers["content-type"].startswith("application/cloudevents-batch+json")
        ns = [event["data"]["n"] for event in request.json()]
        assert ns == sorted(ns)  # publish order within a batch
    received = sorted(event["data"]["n"] for r in receiver.requests for event in r.json())
    assert received == list(range(25))
    assert Delivery.objects.filter(status="succeeded").count() == 25
    assert Attempt.objects.count() == 25  # one attempt per event
    assert Endpoint.objects.get().consecutive_failures == 0


def test_a_batch_succeeds_or_fails_together(api, receiver, redis_conn):
    receiver.script = [Reply(status=503), Reply(status=200)]
    topic, subscription = setup(api, receiver, batch=50, delivery_policy={
        "retrySchedule": {"delays": [0.1]}, "retryLimits": {"maxAttempts": 2}})
    publish_all(api, topic, subscription, 8)
    settle()
    assert len(receiver.requests) == 2  # the failed batch, then the same events again in one request
    assert len(receiver.requests[0].json()) == len(receiver.requests[1].json()) == 8
    assert receiver.requests[0].headers["webhook-id"] == receiver.requests[1].headers["webhook-id"]
    assert set(Delivery.objects.values_list("status", "attempt_count")) == {("succeeded", 2)}
    assert Attempt.objects.filter(outcome="retryable_failure").count() == 8


def test_dead_letters_count_events_and_the_endpoint_counts_one_failure(api, receiver, redis_conn):
    receiver.script = [Reply(status=500)]
    topic, subscription = setup(api, receiver, batch=20, delivery_policy={
        "retrySchedule": {"delays": [0.1]}, "retryLimits": {"maxAttempts": 1}})
    publish_all(api, topic, subscription, 12)
    settle()
    assert len(receiver.requests) == 1
    assert Delivery.objects.filter(status="dead_lettered", dead_letter_reason="max_attempts").count() == 12
    assert Endpoint.objects.get().consecutive_failures == 1  # one request failed, not twelve


def test_a_failed_batch_stores_its_answer_once(api, receiver, redis_conn):
    """What the receiver sent back is stored once per request, however many events the request carried, and the
    answers journal keeps nothing once the attempts are recorded."""
    answer = b"x" * 4096
    receiver.script = [Reply(status=500, body=answer, headers={f"X-Noise-{n}": "y" * 100 for n in range(60)})]
    topic, subscription = setup(api, receiver, batch=50, delivery_policy={"retryLimits": {"maxAttempts": 1}})
    publish_all(api, topic, subscription, 50)
    settle()
    assert len(receiver.requests) == 1 and Attempt.objects.count() == 50
    [exchange] = Exchange.objects.all()
    assert exchange.response_body == answer.decode() and len(exchange.response_headers) > 60
    stored = sum(len(a.response_body) + len(json.dumps(a.response_headers)) + len(a.request_body)
                 for a in Attempt.objects.all())
    assert stored <= 50 * len("{}")  # the attempts keep no copy of their own
    shown = api.get(f"/api/deliveries/{Attempt.objects.first().delivery_id}/").json()["attempts"][0]
    assert shown["response_body"] == answer.decode() and shown["response_status"] == 500
    assert shown["request_body"].startswith("[")  # the batch as sent, shown on each of its attempts
    assert list(redis_conn.scan_iter("herald:answers:*")) == []


def test_the_preferred_size_cuts_batches(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver, batch=100, preferred_batch_size_kb=1)
    publish_all(api, topic, subscription, 6, payload=lambda n: {"n": n, "pad": "x" * 300})
    settle()
    assert all(len(r.body) <= 1024 for r in receiver.requests), [len(r.body) for r in receiver.requests]
    assert sum(len(r.json()) for r in receiver.requests) == 6 and len(receiver.requests) >= 3


def test_batches_are_throttled_as_requests(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver, batch=5,
                                delivery_policy={"throttlePolicy": {"maxReceivesPerSecond": 1}})
    publish_all(api, topic, subscription, 15)
    started = time.time()
    settle(horizon=3)
    arrivals = sorted(r.at for r in receiver.requests)
    assert [len(r.json()) for r in receiver.requests] == [5, 5, 5]
    assert arrivals[2] - arrivals[0] >= 2 - 0.05 and arrivals[0] >= started - 0.05

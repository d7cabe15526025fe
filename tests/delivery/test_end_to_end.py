"""Publish through the API, deliver through a real RQ worker to a real local receiver; verify what arrived."""

import json
from datetime import timedelta

import django_rq
import pytest
from standardwebhooks.webhooks import Webhook

from delivery.engine.scheduler import dispatch
from delivery.engine.sending import attempts, jobs
from delivery.models import Attempt, Delivery
from tests.conftest import subscribe
from tests.receiver import Reply, parse_cloudevent

pytestmark = pytest.mark.django_db(transaction=True)



def test_published_event_arrives_as_signed_cloudevent(api, receiver, run_worker):
    topic, subscription = subscribe(api, receiver)

    published = api.post(f"/api/topics/{topic['id']}/publish/",
                         {"payload": {"order": 42}, "event_type": "order.created", "subject": "orders/42"},
                         format="json")
    assert published.status_code == 202
    assert published.json()["deliveries"] == 1
    run_worker()

    [request] = receiver.wait_for(1)
    verified = Webhook(subscription["secret"]).verify(request.body, request.headers)
    assert verified["data"] == {"order": 42}
    event, data = parse_cloudevent(request)
    assert event["specversion"] == "1.0"
    assert event["id"] == published.json()["message_id"]
    assert event["source"] == "/topics/orders"
    assert event["type"] == "order.created"
    assert event["subject"] == "orders/42"
    assert data == {"order": 42}
    assert request.headers["content-type"].startswith("application/cloudevents+json")
    assert request.headers["webhook-id"] == published.json()["message_id"]
    assert request.headers["herald-attempt"] == "1"
    assert request.headers["herald-subscription"] == str(subscription["id"])
    assert request.headers["user-agent"].startswith("Herald/")

    delivery = Delivery.objects.get()
    assert delivery.status == "succeeded" and delivery.attempt_count == 1 and delivery.delivered_at
    attempt = Attempt.objects.get()
    assert (attempt.response_status, attempt.outcome, attempt.queue) == (200, "success", "deliveries")
    assert attempt.response_body == '{"ok":true}'


def test_raw_delivery_sends_payload_with_binary_mode_headers(api, receiver, run_worker):
    topic, subscription = subscribe(api, receiver, raw_message_delivery=True)

    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"x": [1, 2]}, "subject": "ü s"},
                         format="json").json()
    run_worker()

    [request] = receiver.wait_for(1)
    assert json.loads(request.body) == {"x": [1, 2]}
    assert request.headers["content-type"] == "application/json"
    Webhook(subscription["secret"]).verify(request.body, request.headers)
    event, _ = parse_cloudevent(request)
    assert event["id"] == published["message_id"]
    assert event["source"] == "/topics/orders"
    assert event["type"] == "herald.message"
    assert event["subject"] == "ü s"
    assert request.headers["ce-specversion"] == "1.0"


def test_text_message_is_delivered_as_text(api, receiver, run_worker):
    topic, subscription = subscribe(api, receiver, raw_message_delivery=True)

    api.post(f"/api/topics/{topic['id']}/publish/", {"message": "hello, world"}, format="json")
    run_worker()

    [request] = receiver.wait_for(1)
    assert request.body == b"hello, world"
    assert request.headers["content-type"].startswith("text/plain")


def test_failure_is_retried_from_the_database_on_the_retries_queue(api, receiver, run_worker):
    receiver.script = [Reply(status=500, body=b"boom"), Reply(status=200)]
    policy = {"retrySchedule": {"delays": [1]}, "retryLimits": {"maxAttempts": 2}}
    topic, subscription = subscribe(api, receiver, policy)

    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    run_worker()

    delivery = Delivery.objects.get()
    assert delivery.status == "pending" and delivery.attempt_count == 1
    just_before = delivery.next_attempt_at - timedelta(milliseconds=1)
    assert dispatch.dispatch_due(now=just_before) == 0  # never early
    assert attempts.process([delivery.id], "retries", now=just_before) == 0
    assert dispatch.dispatch_due(now=delivery.next_attempt_at) == 1  # due at its time (passed in, not slept to)
    assert attempts.process([delivery.id], "retries", now=delivery.next_attempt_at) == 1

    first, second = receiver.wait_for(2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert (first.headers["herald-attempt"], second.headers["herald-attempt"]) == ("1", "2")
    delivery.refresh_from_db()
    assert delivery.status == "succeeded" and delivery.attempt_count == 2
    assert list(Attempt.objects.values_list("queue", "response_status", "outcome")) == [
        ("deliveries", 500, "retryable_failure"), ("retries", 200, "success")]


def test_duplicate_jobs_deliver_once(api, receiver, run_worker, redis_conn):
    topic, _ = subscribe(api, receiver)
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    delivery = Delivery.objects.get()
    django_rq.get_queue("deliveries").enqueue(jobs.deliver, [delivery.id], "deliveries")

    run_worker()

    assert len(receiver.wait_for(1)) == 1  # the burst worker has run both jobs when it returns
    assert len(receiver.requests) == 1
    assert Attempt.objects.count() == 1


def test_a_stream_of_publishes_is_sent_by_one_pump(api, receiver, run_worker, redis_conn):
    """Batching under a stream: publishes do not queue a job each; one pump takes everything that is due."""
    topic, _ = subscribe(api, receiver)
    for n in range(5):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": n}, format="json")
    assert django_rq.get_queue("deliveries").count == 1
    assert Delivery.objects.filter(status="pending").count() == 5

    run_worker()

    assert len(receiver.wait_for(5)) == 5
    assert set(Attempt.objects.values_list("queue", flat=True)) == {"deliveries"}

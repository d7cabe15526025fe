"""Transformations through a real worker and a real receiver: the transformed body is what is sent, signed and
stored; a cancelling handler ends its delivery with no request; a failing one dead-letters its delivery at once,
and a redrive after the fix delivers it; the endpoint's health never counts what a handler did."""

import json

import pytest
from standardwebhooks.webhooks import Webhook

from delivery.engine.accounts import recovery
from delivery.engine.accounts.subscribing import subscription_create
from delivery.events import publish
from delivery.models import Attempt, Delivery
from subscriptions.models import Endpoint, Subscription, Topic
from tests.conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)
SLACK = """
function handler(webhook) {
  webhook.payload = {text: "New order " + webhook.payload.id + " (" + webhook.eventType + ")"};
  return webhook;
}
"""


def subscribed(user, receiver, code: str | None, **options) -> tuple[Topic, Subscription, str]:
    topic = Topic.objects.create(owner=user, name="orders")
    subscription, secret = subscription_create(topic=topic, endpoint=receiver.url, **options)
    if code is not None:  # (the services' own check of the code is the API's and the rules' tests)
        Subscription.objects.filter(pk=subscription.pk).update(transformation={"code": code, "enabled": True})
    return topic, subscription, secret


def test_the_transformed_body_is_sent_signed_and_stored(user, receiver, redis_conn):
    topic, subscription, secret = subscribed(user, receiver, SLACK)
    publish(topic, {"id": 42, "total": 9}, event_type="order.created")
    drain()
    received = receiver.wait_for(1)[0]
    assert received.method == "POST" and json.loads(received.body) == {"text": "New order 42 (order.created)"}
    assert received.headers["content-type"] == "application/json"
    assert received.headers["ce-type"] == "order.created"  # the event's attributes go along as ce-* headers
    verified = Webhook(secret).verify(received.body, received.headers)
    assert verified == {"text": "New order 42 (order.created)"}
    attempt = Attempt.objects.get()
    assert json.loads(attempt.request_body) == {"text": "New order 42 (order.created)"}
    assert attempt.request_headers["webhook-signature"] == received.headers["webhook-signature"]
    assert Delivery.objects.get().status == "succeeded"


def test_a_handler_may_send_with_put(user, receiver, redis_conn):
    topic, _, _ = subscribed(user, receiver, "function handler(w) { w.method = 'PUT'; return w; }")
    publish(topic, {"id": 1})
    drain()
    received = receiver.wait_for(1)[0]
    assert received.method == "PUT" and json.loads(received.body) == {"id": 1}


def test_a_cancelling_handler_ends_the_delivery_with_its_reason_and_no_request(user, receiver, redis_conn):
    code = "function handler(w) { if (w.payload.test) { w.cancel = true; } return w; }"
    topic, _, _ = subscribed(user, receiver, code)
    cancelled = publish(topic, {"test": True, "id": 1})
    kept = publish(topic, {"test": False, "id": 2})
    drain()
    assert [json.loads(r.body) for r in receiver.requests] == [{"test": False, "id": 2}]
    ended = Delivery.objects.get(message=cancelled)
    assert ended.status == "cancelled" and ended.dead_letter_reason == "cancelled" and ended.finished_at
    attempt = ended.attempts.get()
    assert attempt.error_class == "cancelled" and attempt.outcome == "cancelled"
    assert attempt.request_body == "" and "nothing was sent" in attempt.error_detail
    assert Delivery.objects.get(message=kept).status == "succeeded"


def test_a_failing_handler_dead_letters_at_once_and_a_redrive_after_the_fix_delivers(user, receiver, redis_conn):
    topic, subscription, _ = subscribed(user, receiver, "function handler(w) {\n  w.payload = w.payload.a.b;\n}")
    publish(topic, {"id": 1})
    drain()
    assert receiver.requests == []
    delivery = Delivery.objects.get()
    assert delivery.status == "dead_lettered" and delivery.dead_letter_reason == "transformation_failed"
    attempt = delivery.attempts.get()  # one try: a deterministic failure is not retried
    assert attempt.error_class == "transformation_failed"
    assert attempt.error_detail.startswith("transformation_failed: line 2: TypeError: Cannot read properties")
    endpoint = Endpoint.objects.get()
    assert endpoint.consecutive_failures == 0 and endpoint.state == "active"  # not the endpoint's doing

    Subscription.objects.filter(pk=subscription.pk).update(transformation={"code": SLACK, "enabled": True})
    assert recovery.subscription_redrive(subscription=Subscription.objects.get(pk=subscription.pk)) == 1
    drain()
    assert json.loads(receiver.wait_for(1)[0].body)["text"].startswith("New order 1")
    assert Delivery.objects.get().status == "succeeded"


def test_a_handler_past_its_time_limit_is_a_stored_reason(user, receiver, redis_conn, settings):
    settings.HERALD_TRANSFORM_TIMEOUT_MS = 30
    topic, _, _ = subscribed(user, receiver, "function handler(w) { while (true) {} }")
    publish(topic, {"id": 1})
    drain()
    attempt = Attempt.objects.get()
    assert attempt.error_detail == "transformation_failed: timed out after 30 ms"
    assert receiver.requests == []


def test_a_turned_off_transformation_sends_the_event_as_it_was(user, receiver, redis_conn):
    topic, subscription, _ = subscribed(user, receiver, None)
    Subscription.objects.filter(pk=subscription.pk).update(transformation={"code": SLACK, "enabled": False})
    publish(topic, {"id": 5})
    drain()
    assert json.loads(receiver.wait_for(1)[0].body)["data"] == {"id": 5}  # the CloudEvent, untouched

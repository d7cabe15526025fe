"""What a receiver may trust: `@webhook_receiver` deduplicates per view (two views on one topic each get every
message), gives the view only signed data (a raw delivery's ce-* headers and Content-Type carry a signature of their
own), and Herald's own event types cannot be published, so no published event can pass for a handshake."""

import json
import time

import pytest
from django.test import Client
from standardwebhooks.webhooks import Webhook

import tests.receiver_urls as hooks
from delivery.engine.accounts.subscribing import subscription_create
from delivery.events import PublishError, publish
from delivery.models import Delivery
from delivery.rules import signing
from subscriptions.models import Topic
from tests.conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def views(live_server, settings, redis_conn):
    settings.ROOT_URLCONF = "tests.receiver_urls"
    hooks.received.clear()
    hooks.invoices.clear()
    hooks.secrets.clear()
    return live_server.url


def test_two_decorated_views_on_one_topic_each_get_every_event(views, user):
    topic = Topic.objects.create(owner=user, name="orders")
    for path in ("orders", "invoices"):
        _, secret = subscription_create(topic=topic, endpoint=f"{views}/hooks/{path}/")
        hooks.secrets.append(secret)
    messages = [publish(topic, {"order": n}, event_type="order.created") for n in range(7)]
    drain()
    assert sorted(e.data["order"] for e in hooks.received) == list(range(7))
    assert sorted(e.data["order"] for e in hooks.invoices) == list(range(7))  # not answered "herald-duplicate"
    assert Delivery.objects.filter(message__in=messages, status="succeeded").count() == 14


def capture_raw_request(receiver, user) -> tuple[str, object]:
    """A genuine raw delivery as Herald sent it (order.created for account:victim), and its secret."""
    topic = Topic.objects.create(owner=user, name="raw")
    _, secret = subscription_create(topic=topic, endpoint=receiver.url, raw_message_delivery=True)
    publish(topic, {"amount": 10}, event_type="order.created", subject="account:victim")
    drain()
    return secret, receiver.wait_for(1)[0]


def replay_to_view(request, **changed) -> object:
    headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
    headers.update(changed)
    meta = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items() if k != "content-type"}
    return Client().post("/hooks/orders/", request.body, content_type=headers["content-type"], **meta)


def test_a_raw_delivery_whose_attributes_were_changed_is_refused(views, user, receiver):
    secret, captured = capture_raw_request(receiver, user)
    hooks.secrets.append(secret)
    # The signature of the attributes verifies with the official Standard Webhooks library, like the body's.
    attributes = signing.attribute_bytes(captured.headers)
    verified = Webhook(secret).verify(attributes, {
        **captured.headers, "webhook-signature": captured.headers["herald-attributes-signature"]})
    assert verified["ce-type"] == "order.created" and verified["ce-subject"] == "account:victim"
    assert verified["content-type"] == "application/json"

    forged = replay_to_view(captured, **{"ce-type": "order.refunded", "ce-subject": "account:attacker"})
    assert forged.status_code == 401 and "ce-* headers" in forged.json()["error"]
    stripped = replay_to_view(captured, **{"herald-attributes-signature": ""})
    assert stripped.status_code == 401
    added = replay_to_view(captured, **{"ce-extra": "injected"})
    assert added.status_code == 401
    assert hooks.received == []

    genuine = replay_to_view(captured)
    assert genuine.status_code == 204
    (event,) = hooks.received
    assert (event.type, event.subject, event.data) == ("order.created", "account:victim", {"amount": 10})


def test_herald_event_types_are_reserved(api, user, redis_conn):
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    url = f"/api/topics/{topic['id']}/publish/"
    for reserved in ("herald.subscription.confirmation", "herald.endpoint.disabled", "herald.anything"):
        refused = api.post(url, {"payload": {"token": "x"}, "event_type": reserved}, format="json")
        assert refused.status_code == 400 and "event_type" in refused.json(), refused.content
        with pytest.raises(PublishError, match="event_type"):
            publish(Topic.objects.get(id=topic["id"]), {"token": "x"}, event_type=reserved)
    batch = api.post(f"{url[:-1]}-batch/", {"entries": [
        {"id": "ok", "payload": 1, "event_type": "order.created"},
        {"id": "bad", "payload": 1, "event_type": "herald.subscription.confirmation"}]}, format="json").json()
    assert [s["id"] for s in batch["successful"]] == ["ok"]
    assert [(f["id"], f["status"], list(f["errors"])) for f in batch["failed"]] == [("bad", 400, ["event_type"])]
    assert api.post(url, {"payload": 1}, format="json").status_code == 202  # the default, herald.message, stays
    assert api.post(url, {"payload": 1, "event_type": "herald.message"}, format="json").status_code == 202


def test_the_handshake_is_answered_only_for_a_confirmation_herald_signed(views, user):
    """A signed structured event of the reserved type is a handshake (only Herald can sign one now that the type
    cannot be published); the view is never called for it."""
    topic = Topic.objects.create(owner=user, name="orders")
    _, secret = subscription_create(topic=topic, endpoint=f"{views}/hooks/orders/")
    hooks.secrets.append(secret)
    body = json.dumps({"specversion": "1.0", "id": "c-1", "type": "herald.subscription.confirmation",
                       "source": "s", "data": {"token": "t-1"}}).encode()
    stamp = int(time.time())
    answer = Client().post("/hooks/orders/", body, content_type="application/cloudevents+json",
                           HTTP_WEBHOOK_ID="c-1", HTTP_WEBHOOK_TIMESTAMP=str(stamp),
                           HTTP_WEBHOOK_SIGNATURE=signing.sign(secret, "c-1", stamp, body))
    assert answer.json() == {"validationResponse": "t-1"} and hooks.received == []

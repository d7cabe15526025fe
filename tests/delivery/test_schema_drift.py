"""Schema drift (docs/tenants.md, "A payload that drifted from its schema"): an event type that records mismatches
instead of refusing them publishes the payload all the same, inside the caller's transaction, and says so in the
message, its fan-out, the log and /metrics."""

import logging

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from delivery.events import publish
from delivery.models import Delivery, Message
from tests.conftest import subscribe

pytestmark = pytest.mark.django_db
SCHEMA = {"type": "object", "required": ["order"], "properties": {"order": {"type": "integer"}}}


@pytest.fixture
def recorded(api, receiver, redis_conn):
    topic, subscription = subscribe(api, receiver, None, name="orders")
    made = api.post("/api/event-types/", {"name": "order.created", "schema": SCHEMA, "validate_payloads": True,
                                          "on_mismatch": "record"}, format="json")
    assert made.status_code == 201 and made.json()["on_mismatch"] == "record", made.content
    return topic, subscription


def test_a_drifted_payload_is_delivered_and_the_mismatch_is_recorded_and_shown(api, recorded, caplog, client,
                                                                                settings):
    topic, subscription = recorded
    answer = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"order": "7"}, "event_type": "order.created"},
                      format="json")
    assert answer.status_code == 202, answer.content
    message = Message.objects.get(id=answer.json()["message_id"])
    assert message.schema_mismatch == ("does not match the schema of 'order.created': payload.order: '7' is not of "
                                       "type 'integer'")
    assert Delivery.objects.filter(message=message, subscription_id=subscription["id"]).exists()
    assert api.get(f"/api/messages/{message.id}/").json()["schema_mismatch"] == message.schema_mismatch
    assert api.get(f"/api/messages/{message.id}/fanout/").json()["schema_mismatch"] == message.schema_mismatch
    assert any("payload.order: '7' is not of type 'integer'" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    settings.HERALD_METRICS_TOKEN = "scrape-token"
    metrics = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token").content.decode()
    assert 'herald_recent_schema_mismatches{event_type="order.created"} 1.0' in metrics
    matching = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"order": 8}, "event_type": "order.created"},
                        format="json")
    assert Message.objects.get(id=matching.json()["message_id"]).schema_mismatch == ""


def test_a_drifted_payload_does_not_fail_the_callers_transaction(recorded, user):
    with transaction.atomic():
        get_user_model().objects.create_user("payment-9")
        message = publish("orders", {"order": None}, owner=user, event_type="order.created")
    assert get_user_model().objects.filter(username="payment-9").exists() and message.schema_mismatch


def test_refuse_stays_the_default_and_the_mode_is_checked(api, recorded):
    topic, _ = recorded
    strict = api.post("/api/event-types/", {"name": "order.paid", "schema": SCHEMA, "validate_payloads": True},
                      format="json").json()
    assert strict["on_mismatch"] == "refuse"
    refused = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {}, "event_type": "order.paid"},
                       format="json")
    assert refused.status_code == 400 and "payload" in refused.json()
    bad = api.patch(f"/api/event-types/{strict['id']}/", {"on_mismatch": "sometimes"}, format="json")
    assert bad.status_code == 400 and "on_mismatch" in bad.json()

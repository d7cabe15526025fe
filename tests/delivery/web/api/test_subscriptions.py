"""The subscriptions resource: its secret shown once, endpoints shared by URL, addresses and policies checked
with the reason, nothing half-written; a changed URL takes its pending deliveries along."""

import pytest
from django.utils.dateparse import parse_datetime

from delivery.models import Delivery
from subscriptions.models import Endpoint, Subscription
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_subscription_secret_only_in_create_response(api):
    topic = create_topic(api)
    created = create_subscription(api, topic["id"])
    assert created["secret"].startswith("whsec_")
    assert "secret" not in api.get(f"/api/subscriptions/{created['id']}/").json()
    assert "secret" not in api.get("/api/subscriptions/").json()["results"][0]
    assert created["status"] == "confirmed"  # HERALD_REQUIRE_CONFIRMATION is off in tests
    assert created["effective_delivery_policy"]["preset"] == "workfront"


def test_subscriptions_to_one_url_share_an_endpoint_record(api):
    topic_a, topic_b = create_topic(api, "a"), create_topic(api, "b")
    first = create_subscription(api, topic_a["id"], url="HTTP://Example.COM:80/hook")
    second = create_subscription(api, topic_b["id"], url="http://example.com/hook")
    assert first["endpoint_id"] == second["endpoint_id"]
    assert first["endpoint"] == "http://example.com/hook"
    assert Endpoint.objects.count() == 1


@pytest.mark.parametrize("url, reason", [
    ("ftp://example.com/x", "only http and https"),
    ("http://", "no host"),
    ("http://user:pw@example.com/", "credentials"),
    ("not a url", "only http and https"),
])
def test_bad_endpoint_urls_are_rejected_with_the_reason(api, url, reason):
    topic = create_topic(api)
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url}, format="json")
    assert response.status_code == 400
    assert reason in response.json()["endpoint"][0]
    assert Subscription.objects.count() == 0


def test_invalid_delivery_policy_names_every_field_and_stores_nothing(api):
    topic = create_topic(api)
    response = api.post("/api/subscriptions/", {
        "topic": topic["id"], "endpoint": "http://example.com/",
        "delivery_policy": {"healthyRetryPolicy": {"numRetries": 101, "backoffFunction": "cubic"}, "jitter": 0.9},
    }, format="json")
    assert response.status_code == 400
    errors = response.json()["delivery_policy"]
    assert set(errors) == {"healthyRetryPolicy.numRetries", "healthyRetryPolicy.backoffFunction", "jitter"}
    assert Subscription.objects.count() == 0 and Endpoint.objects.count() == 0


@pytest.mark.parametrize("url", ["http://127.0.0.1/x", "http://2130706433/", "http://0x7f.1/", "http://[::1]/",
                                 "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/latest/meta-data/",
                                 "http://10.0.0.5/", "http://localhost:8000/"])
def test_private_addresses_are_refused_at_subscribe_time(api, settings, url):
    settings.HERALD_ALLOWED_NETWORKS = []
    topic = create_topic(api)
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url}, format="json")
    assert response.status_code == 400
    assert "webhooks may not be sent there" in response.json()["endpoint"][0]
    assert "HERALD_ALLOWED_NETWORKS" in response.json()["endpoint"][0]  # what to do about it
    assert Subscription.objects.count() == 0


def test_changing_the_url_moves_pending_deliveries_with_it(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"], url="http://127.0.0.1:9/old")
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    moved = api.patch(f"/api/subscriptions/{subscription['id']}/", {"endpoint": "http://127.0.0.1:9/new"},
                      format="json").json()
    assert moved["endpoint"] == "http://127.0.0.1:9/new" and moved["endpoint_id"] != subscription["endpoint_id"]
    assert Delivery.objects.get().endpoint_id == moved["endpoint_id"]


def test_a_subscription_confirmed_without_a_handshake_says_since_when(api, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = False
    topic = create_topic(api)
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/hook"},
                       format="json").json()
    assert created["status"] == "confirmed"
    assert created["confirmed_at"] is not None
    assert abs(parse_datetime(created["confirmed_at"]) - parse_datetime(created["created_at"])).total_seconds() < 60

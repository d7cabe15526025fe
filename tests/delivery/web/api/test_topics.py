"""The topics resource: create, read, change, names unique per owner; topics by name where people expect them
(publish, subscribe, read), and subscribing twice returns the existing subscription, as SNS does, instead of one
that would deliver every event twice."""

import pytest

from delivery.models import Delivery
from subscriptions.models import Subscription
from tests.conftest import drain
from tests.delivery.web.api.calls import create_topic

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_topic_by_name_for_publish_subscribe_and_read(api, other_api, receiver, redis_conn):
    created = api.post("/api/topics/", {"name": "orders.eu"}, format="json")
    assert created.status_code == 201
    assert api.get("/api/topics/orders.eu/").json()["id"] == created.json()["id"]
    subscribed = api.post("/api/subscriptions/", {"topic": "orders.eu", "endpoint": receiver.url}, format="json")
    assert subscribed.status_code == 201 and subscribed.json()["topic"] == created.json()["id"]
    published = api.post("/api/topics/orders.eu/publish/", {"payload": {"n": 1}}, format="json")
    assert published.status_code == 202 and published.json()["deliveries"] == 1
    drain()
    assert receiver.wait_for(1)[0].json()["data"] == {"n": 1}

    # Names are each owner's own: another owner's name is unknown, as an unknown name is.
    assert other_api.get("/api/topics/orders.eu/").status_code == 404
    assert other_api.post("/api/topics/orders.eu/publish/", {"payload": 1}, format="json").status_code == 404
    refused = other_api.post("/api/subscriptions/", {"topic": "orders.eu", "endpoint": receiver.url}, format="json")
    assert refused.status_code == 400 and refused.json() == {"topic": ["You have no topic named 'orders.eu'."]}
    missing = api.get("/api/topics/nothing-here/")
    assert missing.status_code == 404 and "nothing-here" in missing.json()["detail"]


def test_a_numeric_name_is_an_id_first(api):
    named_seven = api.post("/api/topics/", {"name": "7"}, format="json").json()
    assert api.get(f"/api/topics/{named_seven['id']}/").json()["name"] == "7"
    if named_seven["id"] != 7:  # no topic 7 of this owner: the name is found
        assert api.get("/api/topics/7/").json()["id"] == named_seven["id"]


def test_subscribing_again_returns_the_existing_subscription(api, receiver, redis_conn):
    api.post("/api/topics/", {"name": "orders"}, format="json")
    first = api.post("/api/subscriptions/", {"topic": "orders", "endpoint": receiver.url,
                                             "filter_policy": {"kind": ["a"]}}, format="json")
    assert first.status_code == 201 and first.json()["secret"].startswith("whsec_")
    # The same endpoint, spelled differently (normalized to the same URL), settings unspecified or the same.
    spelled = receiver.url.replace("http://127.0.0.1", "HTTP://127.0.0.1")
    again = api.post("/api/subscriptions/", {"topic": "orders", "endpoint": spelled}, format="json")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert "secret" not in again.json()  # never shown again
    same = api.post("/api/subscriptions/", {"topic": "orders", "endpoint": receiver.url,
                                            "filter_policy": {"kind": ["a"]}}, format="json")
    assert same.status_code == 200 and same.json()["id"] == first.json()["id"]
    different = api.post("/api/subscriptions/", {"topic": "orders", "endpoint": receiver.url,
                                                 "filter_policy": {"kind": ["b"]}}, format="json")
    assert different.status_code == 409
    assert f"subscription {first.json()['id']}) with a different filter_policy" in different.json()["endpoint"][0]
    assert Subscription.objects.count() == 1

    api.post("/api/topics/orders/publish/", {"payload": 1, "attributes": {"kind": "a"}}, format="json")
    drain()
    assert Delivery.objects.count() == 1 and len(receiver.wait_for(1)) == 1


def test_the_walkthrough_runs_twice(api, receiver, redis_conn):
    """The README's steps, by names, twice in a row: the same topic and subscription, two messages delivered."""
    for run in range(2):
        topic = api.post("/api/topics/", {"name": "orders"}, format="json")
        assert topic.status_code == (201 if run == 0 else 200)
        subscription = api.post("/api/subscriptions/", {"topic": "orders", "endpoint": receiver.url}, format="json")
        assert subscription.status_code == (201 if run == 0 else 200)
        published = api.post("/api/topics/orders/publish/", {"payload": {"order": 42},
                                                             "event_type": "order.created"}, format="json")
        assert published.status_code == 202 and published.json()["deliveries"] == 1
        drain()
    assert Subscription.objects.count() == 1 and len(receiver.wait_for(2)) == 2


def test_topic_crud(api):
    topic = create_topic(api, description="all orders")
    assert list(topic) == ["id", "name", "description", "delivery_policy", "message_retention_days",
                           "open_to_tenants", "created_at", "updated_at"]
    assert api.get(f"/api/topics/{topic['id']}/").json()["description"] == "all orders"
    patched = api.patch(f"/api/topics/{topic['id']}/", {"description": "changed"}, format="json")
    assert patched.status_code == 200 and patched.json()["description"] == "changed"
    assert api.delete(f"/api/topics/{topic['id']}/").status_code == 204
    assert api.get(f"/api/topics/{topic['id']}/").status_code == 404


def test_topic_name_rules_and_uniqueness_per_owner(api, other_api):
    bad = api.post("/api/topics/", {"name": "has space"}, format="json")
    assert bad.status_code == 400 and "name" in bad.json()
    too_long = api.post("/api/topics/", {"name": "x" * 257}, format="json")
    assert too_long.status_code == 400 and "name" in too_long.json()
    create_topic(api, "orders")
    again = api.post("/api/topics/", {"name": "orders"}, format="json")  # as SNS CreateTopic: the same topic
    assert again.status_code == 200 and again.json()["name"] == "orders"
    assert api.get("/api/topics/").json()["count"] == 1
    different = api.post("/api/topics/", {"name": "orders", "description": "other"}, format="json")
    assert different.status_code == 409 and "with a different description" in different.json()["name"][0]
    create_topic(other_api, "orders")  # another owner may use the same name

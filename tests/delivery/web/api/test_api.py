"""The REST API: CRUD, ownership (404 for what is not yours), errors, pagination, filtering, publish."""

import pytest
from django.test import Client
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from delivery.models import Delivery, Message
from subscriptions.models import Endpoint, Subscription, Topic
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def create_topic(api, name="orders", **extra):
    response = api.post("/api/topics/", {"name": name, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def create_subscription(api, topic_id, url="http://127.0.0.1:9/hook", **extra):
    response = api.post("/api/subscriptions/", {"topic": topic_id, "endpoint": url, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_anonymous_requests_get_401():
    client = APIClient()
    for path in ["/api/topics/", "/api/subscriptions/", "/api/messages/", "/api/deliveries/", "/api/endpoints/"]:
        response = client.get(path)
        assert response.status_code == 401, path
        assert "WWW-Authenticate" in response


def test_a_browser_that_is_not_logged_in_is_offered_a_login(user):
    page = APIClient().get("/api/", HTTP_ACCEPT="text/html")
    assert page.status_code == 401
    assert '<a id="herald-login" href="/admin/login/?next=/api/">Log in</a>' in page.content.decode()
    logged_in = Client()
    logged_in.force_login(user)
    assert 'id="herald-login"' not in logged_in.get("/api/", HTTP_ACCEPT="text/html").content.decode()


def test_topic_crud(api):
    topic = create_topic(api, description="all orders")
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


def test_another_users_objects_answer_404(api, other_api, receiver):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"], url=receiver.url)
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    delivery = Delivery.objects.get()
    endpoint_id = subscription["endpoint_id"]

    for path in [f"/api/topics/{topic['id']}/", f"/api/subscriptions/{subscription['id']}/",
                 f"/api/messages/{published['message_id']}/", f"/api/deliveries/{delivery.id}/",
                 f"/api/endpoints/{endpoint_id}/"]:
        assert other_api.get(path).status_code == 404, path
    assert other_api.patch(f"/api/topics/{topic['id']}/", {"description": "x"}, format="json").status_code == 404
    assert other_api.delete(f"/api/subscriptions/{subscription['id']}/").status_code == 404
    assert other_api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").status_code == 404
    # Subscribing to someone else's topic looks exactly like subscribing to a topic that does not exist.
    foreign = other_api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json")
    missing = other_api.post("/api/subscriptions/", {"topic": 999999, "endpoint": receiver.url}, format="json")
    assert foreign.status_code == missing.status_code == 400
    assert foreign.json()["topic"][0].replace(str(topic["id"]), "N") == missing.json()["topic"][0].replace(
        "999999", "N")
    for path in ["/api/topics/", "/api/subscriptions/", "/api/messages/", "/api/deliveries/", "/api/endpoints/"]:
        assert other_api.get(path).json()["count"] == 0, path


def test_staff_see_everything(api, django_user_model):
    create_topic(api)
    staff = django_user_model.objects.create_user("ops", password="pw-ops-12345", is_staff=True)

    assert client_for(staff).get("/api/topics/").json()["count"] == 1


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


def test_publish_answers_202_with_message_id_and_delivery_count(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/a")
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/b")
    response = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"a": 1}, "attributes": {"k": "v"}},
                        format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["deliveries"] == 2 and body["duplicate"] is False
    message = Message.objects.get(id=body["message_id"])
    assert message.payload == {"a": 1} and message.attributes == {"k": "v"}
    assert Delivery.objects.filter(message=message, status="pending").count() == 2


def test_publish_validation(api):
    topic = create_topic(api)
    url = f"/api/topics/{topic['id']}/publish/"
    neither = api.post(url, {"subject": "x"}, format="json")
    assert neither.status_code == 400 and "payload" in neither.json()
    both = api.post(url, {"payload": 1, "message": "x"}, format="json")
    assert both.status_code == 400
    bad_attrs = api.post(url, {"payload": 1, "attributes": {"k": {"nested": 1}}}, format="json")
    assert bad_attrs.status_code == 400 and "attributes" in bad_attrs.json()
    malformed = api.generic("POST", url, '{"payload": ', content_type="application/json")
    assert malformed.status_code == 400 and "JSON" in malformed.json()["detail"]
    assert Message.objects.count() == 0


def test_publish_over_the_size_limit_answers_413(api, settings):
    settings.HERALD_MAX_PAYLOAD_BYTES = 1000
    topic = create_topic(api)
    url = f"/api/topics/{topic['id']}/publish/"
    assert api.post(url, {"message": "x" * 1000}, format="json").status_code == 202
    response = api.post(url, {"message": "x" * 1001}, format="json")
    assert response.status_code == 413 and "1001 bytes" in response.json()["detail"]
    assert Message.objects.count() == 1


def test_only_confirmed_matching_subscriptions_get_deliveries(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/all")
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/eu", filter_policy={"region": ["eu"]})
    pending = create_subscription(api, topic["id"], url="http://127.0.0.1:9/pending")
    # never confirmed (a confirmed_at would make it one awaiting a changed endpoint's consent: held, not skipped)
    Subscription.objects.filter(id=pending["id"]).update(status="pending_confirmation", confirmed_at=None)
    url = f"/api/topics/{topic['id']}/publish/"
    assert api.post(url, {"payload": 1, "attributes": {"region": "us"}}, format="json").json()["deliveries"] == 1
    assert api.post(url, {"payload": 1, "attributes": {"region": "eu"}}, format="json").json()["deliveries"] == 2


def test_lists_are_paginated_and_filterable(api):
    for n in range(3):
        create_topic(api, f"t{n}")
    page = api.get("/api/topics/?limit=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    assert api.get("/api/topics/?name=t1").json()["count"] == 1
    topic = Topic.objects.get(name="t0")
    create_subscription(api, topic.id)
    assert api.get(f"/api/subscriptions/?topic={topic.id}").json()["count"] == 1
    assert api.get("/api/subscriptions/?status=paused").json()["count"] == 0


def test_message_detail_shows_per_subscription_status(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    detail = api.get(f"/api/messages/{published['message_id']}/").json()
    assert [(d["subscription"], d["status"]) for d in detail["deliveries"]] == [(subscription["id"], "pending")]
    assert api.get(f"/api/deliveries/?message={published['message_id']}").json()["count"] == 1


def test_openapi_schema_and_docs_are_served(api):
    schema = api.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/topics/{id}/publish/" in schema.content
    assert api.get("/api/docs/").status_code == 200


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

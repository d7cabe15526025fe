"""Hostile and edge-case input: every cause that once answered 500 now answers 400 naming the field (or 413 as
JSON), and nothing is stored."""

import json

import pytest
from django.core.exceptions import ValidationError

from delivery.engine.accounts import subscribing
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Delivery, Message
from subscriptions.models import EventType, Subscription, Tenant, Topic

pytestmark = pytest.mark.django_db

NUL_CASES = {
    "payload string": '{"payload": {"text": "a\\u0000b"}}',
    "payload key": '{"payload": {"a\\u0000": 1}}',
    "attribute": '{"payload": 1, "attributes": {"kind": "x\\u0000"}}',
    "surrogate in payload": '{"payload": "\\ud800"}',
    "surrogate in attribute": '{"payload": 1, "attributes": {"k": "\\udfff"}}',
    "huge number in attribute": '{"payload": 1, "attributes": {"n": 1e400}}',
    "huge number in payload": '{"payload": [1, -1e400]}',
    "deep nesting": '{"payload": ' + "[" * 1000 + "]" * 1000 + "}",
    "nesting past Python's recursion limit": '{"payload": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues on the real test Redis."""


@pytest.fixture
def topic(api):
    return api.post("/api/topics/", {"name": "orders"}, format="json").json()


def post_raw(api, path, body: str):
    return api.generic("POST", path, body.encode("utf-8", "surrogatepass"), content_type="application/json")


@pytest.mark.parametrize("body", NUL_CASES.values(), ids=NUL_CASES.keys())
def test_unstorable_publish_bodies_answer_400_naming_the_field(api, topic, body):
    response = post_raw(api, f"/api/topics/{topic['id']}/publish/", body)
    assert response.status_code == 400, response.content
    errors = response.json()
    assert set(errors) <= {"payload", "attributes", "detail"}, errors
    assert Message.objects.count() == 0


@pytest.mark.parametrize("field,value", [
    ("filter_policy", {"kind\u0000": ["a"]}),
    ("filter_policy", {"kind": ["a\u0000"]}),
    ("delivery_policy", {"preset": "workfront\u0000"}),
    ("delivery_policy", {"requestPolicy": {"headerContentType": "text/plain\u0000"}}),
])
def test_unstorable_subscription_fields_answer_400(api, topic, receiver, field, value):
    body = json.dumps({"topic": topic["id"], "endpoint": receiver.url, field: value})
    response = post_raw(api, "/api/subscriptions/", body)
    assert response.status_code == 400 and field in response.json(), response.content
    assert Subscription.objects.count() == 0


@pytest.mark.parametrize("policy,field", [
    ({"jitter": None}, "jitter"),
    ({"requestPolicy": {"timeoutSeconds": None}}, "requestPolicy.timeoutSeconds"),
    ({"healthyRetryPolicy": {"minDelayTarget": None}}, "healthyRetryPolicy.minDelayTarget"),
    ({"healthyRetryPolicy": {"maxDelayTarget": None}}, "healthyRetryPolicy.maxDelayTarget"),
    ({"healthyRetryPolicy": {"numRetries": None}}, "healthyRetryPolicy.numRetries"),
    ({"preset": []}, "preset"),
    ({"preset": {"a": 1}}, "preset"),
    ({"requestPolicy": {"headerContentType": 5}}, "requestPolicy.headerContentType"),
    ({"healthyRetryPolicy": {"backoffFunction": ["linear"]}}, "healthyRetryPolicy.backoffFunction"),
])
def test_policy_type_errors_answer_400_on_subscribe_patch_topic_and_preview(api, topic, receiver, policy, field):
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                               "delivery_policy": policy}, format="json")
    assert created.status_code == 400, created.content
    assert field in created.json()["delivery_policy"]
    assert Subscription.objects.count() == 0

    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url},
                            format="json").json()
    patched = api.patch(f"/api/subscriptions/{subscription['id']}/", {"delivery_policy": policy}, format="json")
    assert patched.status_code == 400 and field in patched.json()["delivery_policy"]
    assert Subscription.objects.get().delivery_policy is None

    on_topic = api.patch(f"/api/topics/{topic['id']}/", {"delivery_policy": policy}, format="json")
    assert on_topic.status_code == 400 and field in on_topic.json()["delivery_policy"]
    assert Topic.objects.get().delivery_policy is None

    preview = api.post("/api/policies/preview/", {"delivery_policy": policy}, format="json")
    assert preview.status_code == 400 and field in preview.json()["delivery_policy"]


@pytest.mark.parametrize("rule", [
    {"numeric": [[1], 5]},
    {"numeric": [{">": 1}, 5]},
    {"numeric": []},
    {"numeric": [">", "ten"]},
])
def test_malformed_numeric_filters_answer_400(api, topic, receiver, rule):
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                                "filter_policy": {"a": [rule]}}, format="json")
    assert response.status_code == 400 and "filter_policy" in response.json(), response.content
    assert Subscription.objects.count() == 0


@pytest.mark.parametrize("path", [
    "/api/messages/?published_after=0001-01-01T00:00:00%2B01:00",
    "/api/messages/?published_before=9999-12-31T23:59:59-01:00",
    "/api/deliveries/?created_after=0001-01-01T00:00:00%2B23:59",
])
def test_times_without_a_utc_equivalent_answer_400(api, path):
    response = api.get(path)
    assert response.status_code == 400, response.content
    assert set(response.json()) <= {"published_after", "published_before", "created_after"}


@pytest.mark.parametrize("window", ["99999999999999999999d", "9" * 5000 + "s", "0s", "32d"])
def test_metrics_windows_out_of_range_answer_400(api, topic, receiver, window):
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url},
                            format="json").json()
    for path in (f"/api/subscriptions/{subscription['id']}/metrics/", f"/api/topics/{topic['id']}/metrics/"):
        response = api.get(path, {"window": window})
        assert response.status_code == 400 and "window" in response.json(), response.content


@pytest.mark.parametrize("query", ["limit=99999999999999999999", "offset=99999999999999999999",
                                   "limit=99999999999999999999&offset=99999999999999999999"])
def test_huge_pagination_values_are_clamped(api, topic, query):
    response = api.get(f"/api/topics/?{query}")
    assert response.status_code == 200, response.content
    assert response.json()["count"] == 1


def test_a_3_mb_body_answers_413_as_json(api, topic):
    body = json.dumps({"payload": "x" * 3_000_000})
    for path in (f"/api/topics/{topic['id']}/publish/", "/api/subscriptions/", "/api/policies/preview/"):
        response = post_raw(api, path, body)
        assert response.status_code == 413, (path, response.content[:200])
        assert response["Content-Type"] == "application/json" and "detail" in response.json()
    assert Message.objects.count() == 0 and Subscription.objects.count() == 0


def test_filtering_by_another_users_id_answers_like_an_id_that_does_not_exist(api, other_api, receiver):
    theirs = other_api.post("/api/topics/", {"name": "theirs"}, format="json").json()
    subscription = other_api.post("/api/subscriptions/", {"topic": theirs["id"], "endpoint": receiver.url},
                                  format="json").json()
    message = other_api.post(f"/api/topics/{theirs['id']}/publish/", {"payload": 1}, format="json").json()
    delivery = Delivery.objects.get()
    missing = {"topic": 10**9, "subscription": 10**9, "message": "00000000-0000-0000-0000-000000000000",
               "endpoint": 10**9}
    existing = {"topic": theirs["id"], "subscription": subscription["id"], "message": message["message_id"],
                "endpoint": delivery.endpoint_id}
    for path, name in [("/api/messages/", "topic"), ("/api/subscriptions/", "topic"),
                       ("/api/deliveries/", "subscription"), ("/api/deliveries/", "message"),
                       ("/api/deliveries/", "endpoint")]:
        other = api.get(path, {name: existing[name]})
        absent = api.get(path, {name: missing[name]})
        assert other.status_code == absent.status_code == 400, (path, name, other.content)
        assert other.json() == absent.json(), (path, name)
        # The owner still filters by it.
        assert other_api.get(path, {name: existing[name]}).json()["count"] == 1, (path, name)


HEADER_BOUND = {
    "endpoint with a line break": ({"endpoint": "http://127.0.0.1:9/a\r\nX-Injected: 1"}, "endpoint"),
    "endpoint with a control character": ({"endpoint": "http://127.0.0.1:9/a\x01b"}, "endpoint"),
    "endpoint with a tab": ({"endpoint": "http://127.0.0.1:9/a\tb"}, "endpoint"),
    "token URL with a line break": ({"oauth_token_url": "http://127.0.0.1:9/token\nX: 1", "oauth_client_id": "c",
                                     "oauth_client_secret": "s"}, "oauth_token_url"),
    "header name with a trailing line break": ({"delivery_headers": [{"name": "X-Tenant\n", "value": "a"}]},
                                               "delivery_headers"),
    "header value with a line break": ({"delivery_headers": [{"name": "X-Tenant", "value": "a\r\nb"}]},
                                       "delivery_headers"),
    "content type with a line break": (
        {"delivery_policy": {"requestPolicy": {"headerContentType": "text/plain; charset=utf-8\r\nX-Injected: 1"}}},
        "delivery_policy"),
}


@pytest.mark.parametrize("fields,field", HEADER_BOUND.values(), ids=HEADER_BOUND.keys())
def test_values_sent_in_headers_refuse_control_characters_on_create_and_change(api, topic, fields, field):
    """Every value Herald later sends in an HTTP header (the URL's host and path, delivery headers, the token URL,
    the policy's Content-Type) is checked where it is stored: a 400 naming the field, nothing stored."""
    body = {"topic": topic["id"], "endpoint": "http://127.0.0.1:9/hook", **fields}
    created = post_raw(api, "/api/subscriptions/", json.dumps(body))
    assert created.status_code == 400 and field in created.json(), created.content
    assert Subscription.objects.count() == 0
    made = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://127.0.0.1:9/hook"},
                    format="json").json()
    changed = api.generic("PATCH", f"/api/subscriptions/{made['id']}/", json.dumps(fields),
                          content_type="application/json")
    assert changed.status_code == 400 and field in changed.json(), changed.content
    stored = Subscription.objects.get()
    assert stored.endpoint.url == "http://127.0.0.1:9/hook" and stored.delivery_headers == []
    assert stored.oauth_token_url == "" and stored.delivery_policy is None


def test_the_python_services_refuse_a_url_with_control_characters(user):
    topic, _ = subscribing.topic_create(owner=user, name="orders")
    with pytest.raises(ApplicationError, match="control characters") as refused:
        subscribing.subscription_create(topic=topic, endpoint="http://127.0.0.1:9/a\r\nX-Injected: 1")
    assert refused.value.field == "endpoint" and not Subscription.objects.exists()


@pytest.mark.parametrize("model,fields", [
    (Topic, {"name": "orders\n"}), (EventType, {"name": "order.created\n"}), (Tenant, {"external_id": "acme\n"}),
])
def test_names_refuse_a_trailing_line_break(user, model, fields):
    with pytest.raises(ValidationError) as refused:
        model(owner=user, **{"name": "n", **fields}).full_clean()
    assert list(refused.value.message_dict) == list(fields)

"""Strict input and the smaller integrity gaps: unknown fields are 400s naming them (never silently ignored), each
filter operator checks its argument's type, publish-batch fails entries one by one (nothing half-written), an
Authorization delivery header cannot survive OAuth2 being added, admin buttons answer 404 alike for what is missing
and what the user may not touch, and the demo receiver answers 400 to malformed requests."""

import json
import socket

import pytest
from django.contrib.auth.models import Permission

from delivery.events import publish
from delivery.models import Message
from subscriptions.models import Subscription, Topic
from tests.conftest import subscribe
from tests.test_first_steps import start_receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("route,body", [
    ("/api/subscriptions/", {"ordered": True}),
    ("/api/subscriptions/", {"filter_polcy": {"region": ["eu"]}}),
    ("/api/topics/", {"nmae": "orders"}),
])
def test_unknown_fields_are_named_and_nothing_is_written(api, receiver, route, body):
    topic = api.post("/api/topics/", {"name": "base"}, format="json").json()
    sent = {"topic": topic["id"], "endpoint": receiver.url, **body} if "subscriptions" in route else {
        "name": "other", **body}
    answer = api.post(route, sent, format="json")
    unknown = next(iter(body))
    assert answer.status_code == 400 and unknown in answer.json(), answer.content
    assert "unknown field; this request takes" in answer.json()[unknown][0]
    assert Subscription.objects.count() == 0 and Topic.objects.count() == 1


def test_unknown_fields_on_updates_publish_and_actions(api, receiver):
    topic, subscription = subscribe(api, receiver)
    url = f"/api/subscriptions/{subscription['id']}/"
    typo = api.patch(url, {"ordered_delivery": True, "max_events_per_bach": 10}, format="json")
    assert typo.status_code == 400 and list(typo.json()) == ["max_events_per_bach"]
    assert api.get(url).json()["ordered_delivery"] is False  # nothing of the request was applied
    assert api.patch(url, {"id": 5, "status": "confirmed"}, format="json").status_code == 200  # read-only: known
    publish_url = f"/api/topics/{topic['id']}/publish/"
    assert list(api.post(publish_url, {"payload": 1, "atributes": {}}, format="json").json()) == ["atributes"]
    assert list(api.post(url + "replay/", {"since": "2026-01-01T00:00:00Z", "unitl": "x"}, format="json").json()
                ) == ["unitl"]
    assert Message.objects.count() == 0
    with pytest.raises(TypeError):
        publish(Topic.objects.get(id=topic["id"]), 1, atributes={})  # the Python API: an unknown keyword


@pytest.mark.parametrize("cidr", [5, True, ["10.0.0.0/8"], {"a": 1}])
def test_cidr_takes_only_a_network_string(api, receiver, cidr):
    topic = api.post("/api/topics/", {"name": "t"}, format="json").json()
    answer = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                              "filter_policy": {"ip": [{"cidr": cidr}]}}, format="json")
    assert answer.status_code == 400 and "ip[0].cidr" in json.dumps(answer.json())


def test_publish_batch_fails_entries_one_by_one(api, receiver):
    topic, _ = subscribe(api, receiver)
    url = f"/api/topics/{topic['id']}/publish-batch/"
    answer = api.post(url, {"entries": [
        {"id": "a", "payload": 1, "idempotency_key": "k"},
        {"id": "b", "payload": 2, "idempotency_key": "k"},  # the same key with another request
        {"id": "c", "payload": 3, "idempotency_key": "k"},
        {"id": "d", "payload": 1, "idempotency_key": "k"},  # the same request again: its message, a duplicate
        {"id": "e", "payload": 5}]}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert [(s["id"], s["duplicate"]) for s in body["successful"]] == [("a", False), ("d", True), ("e", False)]
    assert [(f["id"], f["status"]) for f in body["failed"]] == [("b", 409), ("c", 409)]
    assert "already used with a different request" in body["failed"][0]["errors"]["detail"]
    assert Message.objects.count() == 2

    missing = api.post(url, {"entries": [{"id": "x", "payload": 1}, {"payload": 2}]}, format="json")
    assert missing.status_code == 400
    assert missing.json()["entries"] == ["entries[1].id is required: each entry needs an id (a non-empty string, "
                                         "unique in the batch) that the answer names it by"]
    assert Message.objects.count() == 2  # nothing of that batch was published


def test_adding_oauth2_to_a_subscription_with_an_authorization_header_is_refused(api, receiver):
    _, subscription = subscribe(api, receiver, delivery_headers=[{"name": "Authorization", "value": "Basic eA=="}])
    url = f"/api/subscriptions/{subscription['id']}/"
    answer = api.patch(url, {"oauth_token_url": receiver.url + "/token", "oauth_client_id": "c",
                             "oauth_client_secret": "s"}, format="json")
    assert answer.status_code == 400 and "Authorization" in answer.json()["delivery_headers"][0]
    assert api.get(url).json()["oauth_token_url"] == ""
    both = api.patch(url, {"oauth_token_url": receiver.url + "/token", "oauth_client_id": "c",
                           "oauth_client_secret": "s", "delivery_headers": []}, format="json")
    assert both.status_code == 200


def test_admin_buttons_answer_404_alike_to_staff_without_permission(client, django_user_model, traffic):
    staff = django_user_model.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_subscription"))
    client.force_login(staff)
    existing = Subscription.objects.first().id
    for object_id in (existing, existing + 1000):
        answer = client.post(f"/admin/herald_subscriptions/subscription/{object_id}/do/pause/")
        assert answer.status_code == 404
    assert Subscription.objects.get(id=existing).status == "confirmed"


def raw_request(port: int, head: bytes, body: bytes = b"") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_the_demo_receiver_answers_400_to_malformed_requests(processes):
    port, log, _ = start_receiver(processes)
    body = json.dumps({"type": "herald.subscription.confirmation", "data": "not an object"}).encode()
    head = f"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    answer = raw_request(port, head, body)
    assert answer.startswith(b"HTTP/1.1 400") and b"data must be an object with a token" in answer
    for declared in (b"-1", b"abc", b"99999999999"):
        answer = raw_request(port, b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: " + declared + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400") and b"Content-Length must be" in answer


def test_actions_that_take_no_body_refuse_fields(api, receiver):
    _, subscription = subscribe(api, receiver)
    answer = api.post(f"/api/subscriptions/{subscription['id']}/pause/", {"reason": "x"}, format="json")
    assert answer.status_code == 400 and "takes no body" in answer.json()["reason"][0]
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"
    assert api.post(f"/api/subscriptions/{subscription['id']}/pause/").status_code == 200

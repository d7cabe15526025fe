"""Consent: a subscription's destination changes only with the new target's consent (the handshake again), and
nothing is sent there meanwhile — no delivery, no replay, no token request — while what is due is held, not lost."""

import json

import pytest

from delivery.models import Delivery
from subscriptions.models import Subscription
from tests.conftest import publish, settle, subscribe
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def echoing(request):
    event = request.json()
    if isinstance(event, dict) and event["type"] == "herald.subscription.confirmation":
        return Reply(body=json.dumps({"validationResponse": event["data"]["token"]}).encode())
    return Reply()


def silent(request):
    return Reply(body=b"{}")  # answers 200, never echoes a token: it has not consented


@pytest.fixture
def confirmation_on(settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True


def kinds(receiver) -> list[str]:
    return [request.json()["type"] for request in receiver.requests]


def kinds_of(request) -> str:
    body = request.json()
    return body["type"] if isinstance(body, dict) else "batch"


def events(receiver) -> list:
    """The data of every event a receiver got, handshakes aside (a batch's events one by one)."""
    found = []
    for request in receiver.requests:
        body = request.json()
        found += [e["data"] for e in (body if isinstance(body, list) else [body])
                  if e["type"] != "herald.subscription.confirmation"]
    return found


def test_a_new_endpoint_gets_only_the_handshake_until_it_confirms(api, receiver, other_receiver, run_worker,
                                                                  confirmation_on):
    receiver.script, other_receiver.script = echoing, silent
    topic, subscription = subscribe(api, receiver, max_events_per_batch=1000)
    settle()
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"
    publish(api, topic, "before")
    settle()

    changed = api.patch(f"/api/subscriptions/{subscription['id']}/", {"endpoint": other_receiver.url}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["status"] == "pending_confirmation"
    assert changed.json()["confirmed_at"] is not None  # the earlier consent, kept for the record
    publish(api, topic, "meanwhile")
    replay = api.post(f"/api/subscriptions/{subscription['id']}/replay/", {"since": "2000-01-01T00:00:00Z"},
                      format="json")
    assert replay.status_code == 409
    settle()

    assert kinds(other_receiver) == ["herald.subscription.confirmation"]  # the handshake, nothing else
    held = Delivery.objects.get(subscription_id=subscription["id"], message__payload="meanwhile")
    assert held.status == "pending" and held.next_attempt_at is None  # held, not lost
    assert events(receiver) == ["before"]  # the old endpoint is not sent the new messages either

    token = other_receiver.requests[0].json()["data"]["token"]
    confirmed = api.post(f"/api/subscriptions/{subscription['id']}/confirm/", {"token": token}, format="json")
    assert confirmed.status_code == 200 and confirmed.json()["status"] == "confirmed"
    settle()
    assert events(other_receiver) == ["meanwhile"]
    assert Delivery.objects.get(id=held.id).status == "succeeded"


def test_the_same_endpoint_spelled_differently_needs_no_new_consent(api, receiver, run_worker, confirmation_on):
    receiver.script = echoing
    _, subscription = subscribe(api, receiver)
    settle()
    respelled = receiver.url.replace("http://127.0.0.1", "HTTP://127.0.0.1")
    changed = api.patch(f"/api/subscriptions/{subscription['id']}/", {"endpoint": respelled}, format="json")
    assert changed.status_code == 200 and changed.json()["status"] == "confirmed"


def test_a_new_token_url_gets_no_request_until_the_endpoint_confirms(api, receiver, other_receiver, run_worker,
                                                                     confirmation_on):
    receiver.script, other_receiver.script = echoing, silent
    topic, subscription = subscribe(api, receiver)
    settle()
    receiver.script = silent  # the endpoint does not consent to the new token URL (yet)
    changed = api.patch(f"/api/subscriptions/{subscription['id']}/", {
        "oauth_token_url": other_receiver.url + "/token", "oauth_client_id": "attacker",
        "oauth_client_secret": "chosen-body"}, format="json")
    assert changed.status_code == 200 and changed.json()["status"] == "pending_confirmation"
    for n in range(3):
        publish(api, topic, n)
    settle()
    assert other_receiver.requests == []  # no token request: nothing is sent on the subscription's behalf
    handshakes = [r for r in receiver.requests if kinds_of(r) == "herald.subscription.confirmation"]
    assert len(handshakes) == 2 and "authorization" not in handshakes[1].headers  # a handshake fetches no token
    assert Delivery.objects.filter(subscription_id=subscription["id"], next_attempt_at=None).count() == 3


def test_without_required_confirmation_a_changed_endpoint_stays_confirmed(api, receiver, other_receiver, run_worker):
    _, subscription = subscribe(api, receiver)
    changed = api.patch(f"/api/subscriptions/{subscription['id']}/", {"endpoint": other_receiver.url}, format="json")
    assert changed.json()["status"] == "confirmed"


def test_a_changed_endpoint_and_token_url_are_asked_nothing_before_consent_even_after_a_resend(
        api, receiver, other_receiver, run_worker, confirmation_on):
    """Whatever asks: deliveries due, a resent confirmation request. The token URL is a real receiver on 127.0.0.1
    that records every request; it gets none, and the new endpoint gets handshakes only (none with a token)."""
    token_url = other_receiver
    receiver.script, token_url.script = echoing, silent
    topic, subscription = subscribe(api, receiver)
    settle()
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"

    receiver.script = silent  # no consent to the change (yet)
    changed = api.patch(f"/api/subscriptions/{subscription['id']}/", {
        "endpoint": receiver.url + "/moved", "oauth_token_url": token_url.url + "/token",
        "oauth_client_id": "chosen-by-the-caller", "oauth_client_secret": "chosen-too"}, format="json")
    assert changed.status_code == 200 and changed.json()["status"] == "pending_confirmation", changed.content
    publish(api, topic, "meanwhile")
    settle()
    resent = api.post(f"/api/subscriptions/{subscription['id']}/resend-confirmation/")
    assert resent.status_code == 202, resent.content
    settle()

    assert token_url.requests == []
    moved = [r for r in receiver.requests if r.path.startswith("/hook/moved")]
    assert [kinds_of(r) for r in moved] == ["herald.subscription.confirmation"] * 2
    assert all("authorization" not in r.headers for r in moved)
    assert Delivery.objects.get(subscription_id=subscription["id"]).next_attempt_at is None  # held, not sent

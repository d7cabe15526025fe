"""Subscription confirmation (engine/accounts/confirmation.py) on its own: the token, the handshake job against a
real local receiver, confirming by token, and what confirming releases. Time is passed in."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.accounts import confirmation
from delivery.engine.accounts.subscribing import subscription_create, subscription_update, topic_create
from delivery.engine.intake.publishing import message_publish
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.plumbing.queues import PUMP_WANTED_KEY
from delivery.engine.state import lifecycle
from delivery.models import Delivery
from delivery.transport.posting import SendResult
from subscriptions.models import Subscription
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
NOW = timezone.now()


@pytest.fixture
def pending(user, receiver, redis_conn, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    topic, _ = topic_create(owner=user, name="consent")
    subscription, _ = subscription_create(topic=topic, endpoint=receiver.url)
    assert subscription.status == "pending_confirmation"
    return subscription


def test_the_token_is_derived_never_stored_and_a_new_request_replaces_it(pending):
    token = confirmation.current_token(pending)
    assert pending.confirmation_token_hash == confirmation.token_hash(token) != token
    assert token not in json.dumps(list(Subscription.objects.filter(id=pending.id).values()), default=str)
    confirmation.confirmation_request(subscription=pending, now=NOW + timedelta(hours=1))
    assert confirmation.current_token(pending) != token
    with pytest.raises(ApplicationError, match="not valid"):
        confirmation.subscription_confirm(token=token)  # the earlier token no longer confirms


def test_a_token_confirms_until_it_expires(pending):
    token = confirmation.current_token(pending)
    expires = pending.confirmation_expires_at
    with pytest.raises(ApplicationError, match="expired"):
        confirmation.subscription_confirm(token=token, now=expires + timedelta(seconds=1))
    confirmed = confirmation.subscription_confirm(token=token, now=expires - timedelta(seconds=1))
    assert (confirmed.status, confirmed.confirmed_at) == ("confirmed", expires - timedelta(seconds=1))
    with pytest.raises(ApplicationError, match="not valid"):
        confirmation.subscription_confirm(token=token)  # spent: confirming clears it
    with pytest.raises(ApplicationError, match="not valid"):
        confirmation.subscription_confirm(token="")


def test_the_handshake_confirms_when_the_endpoint_echoes_the_token(pending, receiver):
    def echo(request):
        return Reply(body=json.dumps({"validationResponse": request.json()["data"]["token"]}).encode())

    receiver.script = echo
    assert confirmation.send_confirmation_request(pending.id) == "confirmed"
    [request] = receiver.requests
    assert request.json()["type"] == confirmation.EVENT_TYPE
    assert "authorization" not in request.headers  # no bearer before consent
    assert Subscription.objects.get(id=pending.id).status == "confirmed"


@pytest.mark.parametrize("reply", [Reply(status=500), Reply(body=b"not json"), Reply(body=b'{"validationResponse": 1}'),
                                   Reply(body=b"[]")])
def test_any_other_answer_leaves_it_pending(pending, receiver, reply):
    receiver.script = [reply]
    assert confirmation.send_confirmation_request(pending.id) in ("no answer", "no validation response")
    assert Subscription.objects.get(id=pending.id).status == "pending_confirmation"


def test_the_job_sends_nothing_for_an_expired_token_or_a_confirmed_subscription(pending, receiver):
    later = pending.confirmation_expires_at + timedelta(seconds=1)
    assert confirmation.send_confirmation_request(pending.id, now=later) == "token expired"
    confirmation.subscription_confirm(token=confirmation.current_token(pending))
    assert confirmation.send_confirmation_request(pending.id) == "not pending"
    assert receiver.requests == []


def test_confirming_a_changed_endpoint_releases_what_was_held(pending, receiver, other_receiver, redis_conn):
    confirmation.subscription_confirm(token=confirmation.current_token(pending))
    message_publish(topic=pending.topic, payload={"n": 1})
    moved = subscription_update(subscription=Subscription.objects.get(id=pending.id), endpoint=other_receiver.url)
    assert moved.status == "pending_confirmation"
    assert lifecycle.held(subscription=moved).count() == 1  # held, not lost
    message_publish(topic=moved.topic, payload={"n": 2})  # published meanwhile: held too
    assert lifecycle.held(subscription=moved).count() == 2
    redis_conn.delete(PUMP_WANTED_KEY.format("deliveries"))

    confirmation.subscription_confirm(token=confirmation.current_token(moved), now=NOW)

    assert set(Delivery.objects.values_list("status", "next_attempt_at")) == {("pending", NOW)}
    assert redis_conn.exists(PUMP_WANTED_KEY.format("deliveries"))  # due now: a pump, not the scheduler


def test_a_handshake_that_did_not_confirm_says_what_it_got_and_why(pending, receiver, api, caplog, user,
                                                                     admin_client):
    """A plain Standard Webhooks receiver answers 200 without validationResponse: the subscription keeps what it
    answered (without the token) and why it did not confirm, in the API, the admin's page and the fan-out's fix,
    and the worker logs it."""
    receiver.script = [Reply(body=b'{"ok": true}')]
    assert confirmation.send_confirmation_request(pending.id) == "no validation response"
    shown = api.get(f"/api/subscriptions/{pending.id}/").json()
    handshake = shown["last_handshake"]
    assert handshake["status"] == 200 and "answer" not in handshake  # the body: the admin's only (anyone's URL)
    assert Subscription.objects.get(id=pending.id).handshake_answer == '{"ok": true}'
    admin_page = admin_client.get(f"/admin/herald_subscriptions/subscription/{pending.id}/change/").content.decode()
    assert "HTTP 200 at " in admin_page and "without validationResponse" in admin_page
    assert handshake["problem"].startswith("the endpoint answered HTTP 200 without validationResponse; answer the "
                                           "confirmation request with a 2xx whose JSON body is")
    assert "did not confirm: the endpoint answered HTTP 200 without validationResponse" in caplog.text
    published = message_publish(topic=pending.topic, payload={"n": 1})[0]
    row = api.get(f"/api/messages/{published.id}/fanout/?subscription={pending.id}").json()["results"][0]
    assert row["outcome"] == "not_confirmed" and "did not confirm: the endpoint answered HTTP 200" in row["fix"]

    def echo_wrongly(received):
        token = received.json()["data"]["token"]
        return Reply(body=json.dumps({"validationResponse": "stale", "echo": token}).encode())

    receiver.script = echo_wrongly
    confirmation.confirmation_request(subscription=Subscription.objects.get(id=pending.id),
                                      now=timezone.now() + timedelta(seconds=1))
    assert confirmation.send_confirmation_request(pending.id) == "no validation response"
    stored = Subscription.objects.get(id=pending.id)
    assert "not this request's token" in stored.handshake_problem
    assert "[token]" in stored.handshake_answer and confirmation.current_token(stored) not in stored.handshake_answer

    receiver.script = [Reply(status=503)]
    confirmation.confirmation_request(subscription=stored, now=timezone.now() + timedelta(seconds=2))
    assert Subscription.objects.get(id=pending.id).handshake_at is None  # a new request: the old answer is not its
    assert confirmation.send_confirmation_request(pending.id) == "no answer"
    assert Subscription.objects.get(id=pending.id).handshake_status == 503

    receiver.script = [Reply(body=b'{"validationResponse": "x"}')]
    stale = confirmation.Handshake(pending.id, "an-older-token", None)
    confirmation.record_handshake(stale, SendResult(status=200, duration_ms=1, body_excerpt="{}"),
                                  timezone.now())
    assert Subscription.objects.get(id=pending.id).handshake_status == 503  # an older request's answer: not kept

"""What the API shows and takes of a subscription (delivery/web/api/subscriptions/shapes.py): its fields in order,
its secret shown once (at creation and rotation, never for Ed25519), a topic by id or by name, secret header values
never shown, the last handshake, the effective policy even when the stored one no longer merges, and the answers of
its actions."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from delivery.rules import signing
from subscriptions.models import Subscription
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db

SHOWN = ["id", "topic", "tenant", "endpoint", "endpoint_id", "endpoint_state", "delivery_policy",
         "effective_delivery_policy", "effective_delivery_policy_sources", "filter_policy", "raw_message_delivery",
         "signature_scheme", "public_key", "previous_public_key", "signing_keys_url", "client_certificate",
         "client_certificate_expires_at", "oauth_token_url", "oauth_client_id", "oauth_scope", "filter_policy_scope",
         "event_types", "ordered_delivery", "max_events_per_batch", "preferred_batch_size_kb", "delivery_headers",
         "send_trace_context", "transformation", "event_version", "status", "confirmed_at", "last_handshake",
         "created_at", "updated_at"]


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_a_subscription_shows_its_fields_in_order_and_its_secret_only_when_created(api):
    topic = create_topic(api)
    created = create_subscription(api, topic["id"])
    assert list(created) == [*SHOWN[:12], "secret", *SHOWN[12:]]
    assert created["secret"].startswith(signing.SECRET_PREFIX) and created["public_key"] is None
    assert list(api.get(f"/api/subscriptions/{created['id']}/").json()) == SHOWN
    assert [list(row) for row in api.get("/api/subscriptions/").json()["results"]] == [SHOWN]


def test_a_topic_is_named_by_id_or_by_name_and_another_owners_is_one_that_does_not_exist(api, other_api):
    topic = create_topic(api)
    by_name = create_subscription(api, "orders", url="http://127.0.0.1:9/by-name")
    assert by_name["topic"] == topic["id"]
    unknown = api.post("/api/subscriptions/", {"topic": "nope", "endpoint": "http://127.0.0.1:9/x"}, format="json")
    assert (unknown.status_code, unknown.json()) == (400, {"topic": ["You have no topic named 'nope'."]})
    theirs = other_api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://127.0.0.1:9/x"},
                            format="json")
    assert theirs.json() == {"topic": [f'Invalid pk "{topic["id"]}" - object does not exist.']}
    by_their_name = other_api.post("/api/subscriptions/", {"topic": "orders", "endpoint": "http://127.0.0.1:9/x"},
                                   format="json")
    assert by_their_name.json() == {"topic": ["You have no topic named 'orders'."]}
    assert Subscription.objects.count() == 1


def test_secret_header_values_are_never_shown(api):
    topic = create_topic(api)
    created = create_subscription(api, topic["id"], delivery_headers=[
        {"name": "X-Api-Key", "value": "s3cret-value", "secret": True}, {"name": "X-Team", "value": "billing"},
        {"name": "X-Region", "from_attribute": "region"}])
    shown = [{"name": "X-Api-Key", "value": None, "secret": True},
             {"name": "X-Team", "value": "billing", "secret": False}, {"name": "X-Region", "from_attribute": "region"}]
    assert created["delivery_headers"] == shown
    detail = api.get(f"/api/subscriptions/{created['id']}/")
    assert detail.json()["delivery_headers"] == shown and b"s3cret-value" not in detail.content


def test_the_last_handshake_is_shown_once_one_was_answered(api):
    topic = create_topic(api)
    created = create_subscription(api, topic["id"])
    assert created["last_handshake"] is None
    at = timezone.now().replace(microsecond=0)
    Subscription.objects.filter(id=created["id"]).update(handshake_at=at, handshake_status=500,
                                                         handshake_problem="the endpoint answered 500",
                                                         handshake_answer="stack trace")
    shown = api.get(f"/api/subscriptions/{created['id']}/").json()["last_handshake"]
    assert (parse_datetime(shown.pop("at")), shown) == (at, {"status": 500, "problem": "the endpoint answered 500"})


def test_a_stored_policy_that_no_longer_reads_shows_the_default_and_says_so(api):
    topic = create_topic(api, delivery_policy={"preset": "event-grid"})
    created = create_subscription(api, topic["id"])
    assert created["effective_delivery_policy"]["preset"] == "event-grid"
    assert created["effective_delivery_policy_sources"]["retrySchedule"] == "topic"
    Subscription.objects.filter(id=created["id"]).update(delivery_policy=[1])  # as a row written by hand may
    shown = api.get(f"/api/subscriptions/{created['id']}/").json()
    assert shown["effective_delivery_policy_sources"] == {
        "*": "default (the subscription's policy no longer makes a valid one with its topic's)"}
    assert shown["effective_delivery_policy"]["preset"] == "workfront"  # the system default in the tests


def test_a_change_takes_no_secret_and_keeps_the_topic(api):
    first, second = create_topic(api, "first"), create_topic(api, "second")
    created = create_subscription(api, first["id"])
    url = f"/api/subscriptions/{created['id']}/"
    refused = api.patch(url, {"secret": signing.generate_secret()}, format="json")
    assert (refused.status_code, refused.json()) == (400, {"secret": [
        "a secret changes by rotation, so the old one keeps signing for 24 hours: POST it to rotate-secret/"]})
    kept = api.patch(url, {"topic": second["id"], "raw_message_delivery": True}, format="json").json()
    assert (kept["topic"], kept["raw_message_delivery"]) == (first["id"], True)


def test_a_rotation_shows_the_new_secret_once_or_for_ed25519_only_the_public_key(api):
    topic = create_topic(api)
    hmac = create_subscription(api, topic["id"], url="http://127.0.0.1:9/hmac")
    rotated = api.post(f"/api/subscriptions/{hmac['id']}/rotate-secret/").json()
    assert list(rotated) == ["secret", "public_key", "previous_secret_expires_at"]
    stored = Subscription.objects.get(id=hmac["id"])
    assert (rotated["secret"], rotated["public_key"]) == (stored.secret, None)
    assert parse_datetime(rotated["previous_secret_expires_at"]) == stored.previous_secret_expires_at
    assert stored.previous_secret == hmac["secret"]

    ed25519 = create_subscription(api, topic["id"], url="http://127.0.0.1:9/ed", signature_scheme="ed25519")
    assert ed25519["secret"] is None and ed25519["previous_public_key"] is None
    keys_id = Subscription.objects.get(id=ed25519["id"]).keys_id
    assert ed25519["signing_keys_url"] == f"/api/keys/{keys_id}/jwks.json"
    rotated = api.post(f"/api/subscriptions/{ed25519['id']}/rotate-secret/").json()
    stored = Subscription.objects.get(id=ed25519["id"])
    assert (rotated["secret"], rotated["public_key"]) == (None, signing.public_key(stored.secret))
    shown = api.get(f"/api/subscriptions/{ed25519['id']}/").json()
    assert (shown["public_key"], shown["previous_public_key"]) == (rotated["public_key"], ed25519["public_key"])
    Subscription.objects.filter(id=ed25519["id"]).update(previous_secret_expires_at=timezone.now() - timedelta(1))
    assert api.get(f"/api/subscriptions/{ed25519['id']}/").json()["previous_public_key"] is None


def test_a_replay_answers_what_it_will_deliver_again(api):
    topic = create_topic(api)
    created = create_subscription(api, topic["id"])
    for n in range(3):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": n}, format="json")
    since = timezone.now() - timedelta(hours=1)
    answer = api.post(f"/api/subscriptions/{created['id']}/replay/", {"since": since.isoformat()}, format="json")
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert list(body) == ["id", "since", "until", "messages", "requested_at"]
    assert (parse_datetime(body["since"]), body["messages"]) == (since, 3)
    assert parse_datetime(body["until"]) == parse_datetime(body["requested_at"])  # until: now, by default

"""An Ed25519 subscription's public keys as a JSON Web Key Set (delivery/web/api/signing_keys.py): public, cached
for five minutes, each key as an OKP JWK beside its whpk_ form; a rotation's previous key listed until its grace
period ends; no key set for an HMAC subscription or one whose endpoint has not confirmed."""

import base64
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from delivery.rules import signing
from delivery.web.api.signing_keys import public_key_of
from subscriptions.models import Subscription
from subscriptions.secrets import Unreadable
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db
NO_SUCH_KEY_SET = {"detail": "No such key set."}


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Subscribing enqueues jobs on the real test Redis."""


def jwk(public: str, suffix: str = "") -> dict:
    """The JWK of a whpk_ key, written out from its base64 (not from Herald's code)."""
    raw = base64.b64decode(public.removeprefix("whpk_"))
    return {"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": public[5:21] + suffix,
            "x": base64.urlsafe_b64encode(raw).decode().rstrip("="), "whpk": public}


def test_the_key_set_is_public_and_lists_the_key_as_a_jwk(api):
    created = create_subscription(api, create_topic(api)["id"], signature_scheme="ed25519")
    answer = APIClient().get(created["signing_keys_url"])  # no token
    assert answer.status_code == 200 and answer["Cache-Control"] == "public, max-age=300"
    assert answer.json() == {"keys": [jwk(created["public_key"])]}


def test_a_rotations_previous_key_is_listed_until_its_grace_period_ends(api):
    created = create_subscription(api, create_topic(api)["id"], signature_scheme="ed25519")
    rotated = api.post(f"/api/subscriptions/{created['id']}/rotate-secret/").json()
    url = created["signing_keys_url"]
    assert APIClient().get(url).json() == {"keys": [jwk(rotated["public_key"]),
                                                    jwk(created["public_key"], "-previous")]}
    Subscription.objects.filter(id=created["id"]).update(previous_secret_expires_at=timezone.now() - timedelta(1))
    assert APIClient().get(url).json() == {"keys": [jwk(rotated["public_key"])]}


def test_no_key_set_answers_for_hmac_or_before_the_endpoint_confirms(api):
    topic = create_topic(api)
    hmac = Subscription.objects.get(id=create_subscription(api, topic["id"], url="http://127.0.0.1:9/hmac")["id"])
    answer = APIClient().get(f"/api/keys/{hmac.keys_id}/jwks.json")
    assert (answer.status_code, answer.json()) == (404, NO_SUCH_KEY_SET)
    ed25519 = create_subscription(api, topic["id"], url="http://127.0.0.1:9/ed", signature_scheme="ed25519")
    api.post(f"/api/subscriptions/{ed25519['id']}/pause/")
    assert APIClient().get(ed25519["signing_keys_url"]).status_code == 200  # paused: still its keys
    Subscription.objects.filter(id=ed25519["id"]).update(status="pending_confirmation")
    answer = APIClient().get(ed25519["signing_keys_url"])
    assert (answer.status_code, answer.json()) == (404, NO_SUCH_KEY_SET)


def test_the_public_key_of_a_signing_key_and_of_nothing_else():
    key = signing.generate_signing_key()
    assert public_key_of(key) == signing.public_key(key) and public_key_of(key).startswith("whpk_")
    for other in (signing.generate_secret(), "", None, Unreadable("fernet:gAAAA")):
        assert public_key_of(other) is None

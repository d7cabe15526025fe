"""Asymmetric signatures (Standard Webhooks `v1a`, Ed25519): Herald keeps the signing key (encrypted at rest, never
shown), receivers verify with the public key, from the subscription or the owner's JWKS; rotation and a change of
scheme sign with both keys for the grace period. Verified here with `cryptography`'s Ed25519 directly, from the
JWKS document, independently of Herald's signing code."""

import base64
import uuid

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from rest_framework.test import APIClient

from delivery.rules import signing
from subscriptions.models import Subscription
from tests.conftest import drain, publish, subscribe
from tests.delivery.web.api.test_secrets_at_rest import dump

pytestmark = pytest.mark.django_db(transaction=True)


def jwks_keys(url: str) -> dict[str, Ed25519PublicKey]:
    """The key set at `url` (the subscription's signing_keys_url), by each key's whpk_ form."""
    response = APIClient().get(url)  # no token: public keys are public
    assert response.status_code == 200
    found = {}
    for key in response.json()["keys"]:
        assert (key["kty"], key["crv"], key["alg"]) == ("OKP", "Ed25519", "EdDSA")
        raw = base64.urlsafe_b64decode(key["x"] + "=" * (-len(key["x"]) % 4))
        assert signing.public_key_bytes(key["whpk"]) == raw
        found[key["whpk"]] = Ed25519PublicKey.from_public_bytes(raw)
    return found


def verifies(key: Ed25519PublicKey, request) -> bool:
    signed = f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode() + request.body
    for candidate in request.headers["webhook-signature"].split():
        version, _, value = candidate.partition(",")
        if version == "v1a":
            try:
                key.verify(base64.b64decode(value), signed)
                return True
            except InvalidSignature:
                continue
    return False


def test_an_ed25519_subscription_signs_v1a_and_never_shows_its_key(api, receiver, user, redis_conn):
    topic, created = subscribe(api, receiver, signature_scheme="ed25519")
    assert created["secret"] is None and created["public_key"].startswith("whpk_")
    keys_id = str(Subscription.objects.get(id=created["id"]).keys_id)
    assert created["signing_keys_url"] == f"/api/keys/{keys_id}/jwks.json"
    signing_key = Subscription.objects.get(id=created["id"]).secret
    assert signing_key.startswith("whsk_") and signing.public_key(signing_key) == created["public_key"]
    for response in (api.get(f"/api/subscriptions/{created['id']}/"), api.get("/api/subscriptions/")):
        assert signing_key.removeprefix("whsk_") not in response.content.decode()
    text = dump()
    assert signing_key.removeprefix("whsk_") not in text and base64.b64decode(
        signing_key.removeprefix("whsk_")).hex() not in text

    publish(api, topic, {"n": 1})
    drain()
    request = receiver.wait_for(1)[0]
    assert request.headers["webhook-signature"].startswith("v1a,")
    assert verifies(jwks_keys(created["signing_keys_url"])[created["public_key"]], request)
    # The receiver helper's check accepts the public key as the secret.
    assert signing.check([created["public_key"]], request.headers["webhook-id"],
                         request.headers["webhook-timestamp"], request.headers["webhook-signature"], request.body,
                         now=int(request.headers["webhook-timestamp"])) is None
    tampered = request.body.replace(b'"n": 1', b'"n": 2').replace(b'"n":1', b'"n":2')
    assert signing.check([created["public_key"]], request.headers["webhook-id"],
                         request.headers["webhook-timestamp"], request.headers["webhook-signature"], tampered,
                         now=int(request.headers["webhook-timestamp"])) == "no signature matches the secret(s)"


def test_rotation_signs_with_both_keys_for_the_grace_period(api, receiver, user, redis_conn):
    topic, created = subscribe(api, receiver, signature_scheme="ed25519")
    rotated = api.post(f"/api/subscriptions/{created['id']}/rotate-secret/").json()
    assert rotated["secret"] is None and rotated["public_key"] != created["public_key"]
    detail = api.get(f"/api/subscriptions/{created['id']}/").json()
    assert (detail["public_key"], detail["previous_public_key"]) == (rotated["public_key"], created["public_key"])
    keys = jwks_keys(created["signing_keys_url"])
    assert set(keys) == {created["public_key"], rotated["public_key"]}
    publish(api, topic)
    drain()
    request = receiver.wait_for(1)[0]
    assert [s[:4] for s in request.headers["webhook-signature"].split()] == ["v1a,", "v1a,"]
    assert all(verifies(key, request) for key in keys.values())


def test_switching_from_hmac_to_ed25519_keeps_the_old_secret_signing(api, receiver, user, redis_conn):
    topic, created = subscribe(api, receiver)
    old_secret = created["secret"]
    switched = api.patch(f"/api/subscriptions/{created['id']}/", {"signature_scheme": "ed25519"}, format="json")
    assert switched.status_code == 200, switched.content
    assert switched.json()["signature_scheme"] == "ed25519" and switched.json()["public_key"].startswith("whpk_")
    publish(api, topic)
    drain()
    request = receiver.wait_for(1)[0]
    assert sorted(s[:3] for s in request.headers["webhook-signature"].split()) == ["v1,", "v1a"]
    args = (request.headers["webhook-id"], request.headers["webhook-timestamp"],
            request.headers["webhook-signature"], request.body)
    now = int(request.headers["webhook-timestamp"])
    assert signing.check([old_secret], *args, now=now) is None  # a receiver not yet switched still verifies
    assert signing.check([switched.json()["public_key"]], *args, now=now) is None
    bad = api.patch(f"/api/subscriptions/{created['id']}/", {"signature_scheme": "rsa"}, format="json")
    assert bad.status_code == 400 and "signature_scheme" in bad.json()


def test_key_sets_cannot_be_enumerated_and_wait_for_consent(api, receiver, user, settings, redis_conn):
    _, confirmed = subscribe(api, receiver, signature_scheme="ed25519")
    assert APIClient().get(confirmed["signing_keys_url"]).status_code == 200
    for guess in (f"/api/keys/{user.id}/jwks.json", f"/api/keys/{confirmed['id']}/jwks.json",
                  f"/api/keys/{uuid.uuid4()}/jwks.json"):
        assert APIClient().get(guess).status_code == 404  # no sequential id names a key set
    settings.HERALD_REQUIRE_CONFIRMATION = True
    pending = api.post("/api/subscriptions/", {"topic": confirmed["topic"], "endpoint": receiver.url + "/other",
                                               "signature_scheme": "ed25519"}, format="json").json()
    assert pending["status"] == "pending_confirmation"
    answer = APIClient().get(pending["signing_keys_url"])
    assert answer.status_code == 404 and pending["public_key"] not in answer.content.decode()

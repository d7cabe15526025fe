"""Bring your own secret: a consumer configures its receiver first and subscribes second, with the same `whsec_`
secret, so Herald's confirmation verifies during the create — through the API, Python and the rotation; bad
secrets are refused naming `secret` with nothing stored; a receiver that cannot verify a confirmation says what to
do about it."""

import base64
import io
import json
import time

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from delivery.engine.accounts.subscribing import subscription_create
from delivery.receiver import CONFIRMATION_FIX, generate_secret
from delivery.rules import signing
from subscriptions.models import Subscription, Topic
from tests import receiver_urls as hooks
from tests.conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


def secret_of(length: int) -> str:
    return "whsec_" + base64.b64encode(b"k" * length).decode()


@pytest.fixture
def topic(api):
    return api.post("/api/topics/", {"name": "own"}, format="json").json()


def test_a_secret_of_your_own_is_kept_encrypted_and_signs(api, topic, receiver, redis_conn):
    mine = generate_secret()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url, "secret": mine},
                       format="json")
    assert created.status_code == 201, created.content
    assert created.json()["secret"] == mine  # the create's answer, as for a generated one
    shown = api.get(f"/api/subscriptions/{created.json()['id']}/").json()
    assert "secret" not in shown and mine not in json.dumps(shown)
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM herald_subscriptions_subscription")
        assert mine not in cursor.fetchone()[0]  # encrypted at rest
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    drain()
    [request] = receiver.wait_for(1)
    assert signing.check([mine], request.headers["webhook-id"], request.headers["webhook-timestamp"],
                         request.headers["webhook-signature"], request.body, now=time.time()) is None


@pytest.mark.parametrize("bad", ["nope", "whsec_", "whsec_!!!!", secret_of(23), secret_of(65), 42, "whsk_abc"])
def test_anything_else_is_a_400_naming_secret_and_nothing_is_stored(api, topic, receiver, bad):
    refused = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url, "secret": bad},
                       format="json")
    assert refused.status_code == 400 and "secret" in refused.json(), refused.content
    assert Subscription.objects.count() == 0


def test_limits_and_schemes(api, topic, receiver):
    for length in (24, 64):
        ok = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": f"{receiver.url}/{length}",
                                              "secret": secret_of(length)}, format="json")
        assert ok.status_code == 201, ok.content
    ed = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": f"{receiver.url}/ed",
                                          "signature_scheme": "ed25519", "secret": secret_of(32)}, format="json")
    assert ed.status_code == 400 and "ed25519" in ed.json()["secret"][0]


def test_subscribing_again_with_another_secret_is_a_conflict(api, topic, receiver):
    body = {"topic": topic["id"], "endpoint": receiver.url, "secret": secret_of(32)}
    assert api.post("/api/subscriptions/", body, format="json").status_code == 201
    assert api.post("/api/subscriptions/", body, format="json").status_code == 200  # the same: idempotent
    other = api.post("/api/subscriptions/", {**body, "secret": secret_of(33)}, format="json")
    assert other.status_code == 409 and "secret" in other.json()["endpoint"][0]


def test_a_secret_changes_by_rotation_which_accepts_yours(api, topic, receiver):
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url},
                       format="json").json()
    url = f"/api/subscriptions/{created['id']}/"
    patched = api.patch(url, {"secret": secret_of(32)}, format="json")
    assert patched.status_code == 400 and "rotate-secret" in patched.json()["secret"][0]
    refused = api.post(f"{url}rotate-secret/", {"secret": "whsec_short"}, format="json")
    assert refused.status_code == 400 and "secret" in refused.json()
    assert Subscription.objects.get().secret == created["secret"]  # nothing changed
    mine = secret_of(40)
    rotated = api.post(f"{url}rotate-secret/", {"secret": mine}, format="json")
    assert rotated.status_code == 200 and rotated.json()["secret"] == mine
    stored = Subscription.objects.get()
    assert (stored.secret, stored.previous_secret) == (mine, created["secret"])  # the old one signs for 24 h
    generated = api.post(f"{url}rotate-secret/", {}, format="json").json()["secret"]
    assert signing.secret_problem(generated) is None and generated != mine


def test_herald_secret_prints_one():
    out = io.StringIO()
    call_command("herald_secret", stdout=out)
    printed = out.getvalue().strip()
    assert signing.secret_problem(printed) is None and len(base64.b64decode(printed[6:])) == 32
    out = io.StringIO()
    call_command("herald_secret", "--bytes", "64", stdout=out)
    assert len(base64.b64decode(out.getvalue().strip()[6:])) == 64


def test_the_documented_walkthrough_confirms_during_the_create(live_server, user, settings, redis_conn):
    """docs/embedding.md, "Receiving": make a secret, configure the view, subscribe with it — confirmed."""
    settings.ROOT_URLCONF = "tests.receiver_urls"
    settings.HERALD_REQUIRE_CONFIRMATION = True
    secret = generate_secret()  # 1. make a secret (or `manage.py herald_secret`)
    hooks.secrets[:] = [secret]  # 2. configure the view with it
    topic = Topic.objects.create(owner=user, name="orders")
    subscription, _ = subscription_create(topic=topic, endpoint=f"{live_server.url}/hooks/orders/",
                                          secret=secret)  # 3. subscribe with it
    drain()  # the worker sends the confirmation the create asked for
    subscription.refresh_from_db()
    assert subscription.status == "confirmed" and subscription.confirmed_at is not None


def test_a_confirmation_the_receiver_cannot_verify_says_what_to_do(live_server, user, settings, redis_conn):
    settings.ROOT_URLCONF = "tests.receiver_urls"
    settings.HERALD_REQUIRE_CONFIRMATION = True
    hooks.secrets[:] = []
    topic = Topic.objects.create(owner=user, name="orders")
    subscription, secret = subscription_create(topic=topic, endpoint=f"{live_server.url}/hooks/orders/")
    body = json.dumps({"specversion": "1.0", "id": "c-1", "type": "herald.subscription.confirmation",
                       "source": "herald", "data": {"token": "t"}}).encode()
    stamp = int(time.time())
    headers = {"HTTP_WEBHOOK_ID": "c-1", "HTTP_WEBHOOK_TIMESTAMP": str(stamp),
               "HTTP_WEBHOOK_SIGNATURE": signing.sign(secret, "c-1", stamp, body)}
    client = Client()
    unconfigured = client.post("/hooks/orders/", body, content_type="application/cloudevents+json", **headers)
    assert unconfigured.status_code == 500
    said = unconfigured.json()["error"]
    assert "HERALD_RECEIVER_SECRETS" in said and CONFIRMATION_FIX in said
    hooks.secrets[:] = [generate_secret()]  # an old or wrong secret
    wrong = client.post("/hooks/orders/", body, content_type="application/cloudevents+json", **headers)
    assert wrong.status_code == 401 and "resend-confirmation" in wrong.json()["error"]
    ordinary = json.dumps({"specversion": "1.0", "id": "m-1", "type": "order.created", "source": "s",
                           "data": 1}).encode()
    plain = client.post("/hooks/orders/", ordinary, content_type="application/cloudevents+json", **headers)
    assert plain.status_code == 401 and CONFIRMATION_FIX not in plain.json()["error"]  # only for confirmations
    hooks.secrets[:] = [secret]  # configured as the answer says: the (re)sent confirmation confirms
    drain()
    assert Subscription.objects.get(id=subscription.id).status == "confirmed"

"""Signing secrets are encrypted at rest: a database dump holds no usable secret; keys rotate (new writes use the
first key, reads try all, herald_reencrypt moves old rows); a lost key is reported, not mistaken for a secret."""

import base64
import subprocess
from importlib import import_module

import pytest
from cryptography.fernet import Fernet
from django.apps import apps as registry
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection

from delivery.models import Attempt, Delivery
from subscriptions import secrets
from subscriptions.models import Subscription
from tests.conftest import drain, publish, subscribe
from tests.receiver import parse_cloudevent
from tests.stack import postgres_bindir

pytestmark = pytest.mark.django_db(transaction=True)


def stored(subscription_id: int) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT secret, previous_secret FROM {Subscription._meta.db_table} WHERE id = %s",
                       [subscription_id])
        return cursor.fetchone()


def dump() -> str:
    db = connection.settings_dict
    return subprocess.run([f"{postgres_bindir()}/pg_dump", "-h", db["HOST"], "-p", str(db["PORT"]), "-U", db["USER"],
                           "--data-only", db["NAME"]], capture_output=True, text=True, check=True, timeout=120).stdout


def test_a_database_dump_contains_no_usable_secret(api, receiver, redis_conn):
    topic, created = subscribe(api, receiver)
    first = created["secret"]
    rotated = api.post(f"/api/subscriptions/{created['id']}/rotate-secret/").json()["secret"]
    text = dump()
    assert "herald_subscriptions_subscription" in text  # the table is in the dump …
    for secret in (first, rotated):  # … its secrets are not, in any form
        key = secret.removeprefix("whsec_")
        assert secret not in text and key not in text
        assert base64.b64decode(key).hex() not in text
    columns = stored(created["id"])
    assert all(value.startswith("fernet:") for value in columns)
    # Herald itself still signs with both during the rotation's grace period.
    publish(api, topic)
    drain()
    request = receiver.wait_for(1)[0]
    assert len(request.headers["webhook-signature"].split()) == 2
    parse_cloudevent(request)


def test_keys_rotate_and_old_rows_are_reencrypted(api, receiver, settings, redis_conn):
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.HERALD_SECRET_KEYS = [old_key]
    _, created = subscribe(api, receiver, delivery_headers=[{"name": "X-Key", "value": "hdr-secret", "secret": True}],
                           oauth_token_url="https://auth.example.com/token", oauth_client_id="c",
                           oauth_client_secret="oauth-secret")
    under_old = stored(created["id"])[0]
    settings.HERALD_SECRET_KEYS = [new_key, old_key]  # a new key first: new writes use it, old rows still read
    assert Subscription.objects.get(id=created["id"]).secret == created["secret"]
    call_command("herald_reencrypt", stdout=open("/dev/null", "w"))
    under_new = stored(created["id"])[0]
    assert under_new != under_old
    settings.HERALD_SECRET_KEYS = [new_key]  # the old key removed
    subscription = Subscription.objects.get(id=created["id"])
    assert subscription.secret == created["secret"] and subscription.oauth_client_secret == "oauth-secret"
    assert secrets.decrypt(subscription.delivery_headers[0]["value"]) == "hdr-secret"


def test_a_lost_key_fails_the_attempt_saying_why_and_rotation_recovers(api, receiver, settings, redis_conn):
    settings.HERALD_SECRET_KEYS = [Fernet.generate_key().decode()]
    topic, created = subscribe(api, receiver, {"retrySchedule": {"delays": [0.1]}, "retryLimits": {"maxAttempts": 2}})
    settings.HERALD_SECRET_KEYS = [Fernet.generate_key().decode()]  # the key is lost
    subscription = Subscription.objects.get(id=created["id"])
    assert isinstance(subscription.secret, secrets.Unreadable)
    subscription.save()  # saving the row again keeps the ciphertext as it was
    assert stored(created["id"])[0] == str(subscription.secret)
    publish(api, topic)
    drain()
    attempt = Attempt.objects.get()
    assert attempt.error_class == "internal" and "rotate its secret" in attempt.error_detail
    assert receiver.requests == []  # nothing went out signed with a wrong key

    new = api.post(f"/api/subscriptions/{created['id']}/rotate-secret/")  # an unreadable secret is not kept
    assert new.status_code == 200 and stored(created["id"])[1] == ""
    assert api.post(f"/api/deliveries/{Delivery.objects.get().id}/retry/").status_code == 202
    drain()
    request = receiver.wait_for(1)[0]
    assert len(request.headers["webhook-signature"].split()) == 1


def test_the_migration_encrypts_existing_plaintext_rows(api, receiver, redis_conn):
    _, created = subscribe(api, receiver)
    with connection.cursor() as cursor:  # a row as an older Herald stored it
        cursor.execute(f"UPDATE {Subscription._meta.db_table} SET secret = %s WHERE id = %s",
                       [created["secret"], created["id"]])
    assert Subscription.objects.get(id=created["id"]).secret == created["secret"]  # read as it was
    migration = import_module("subscriptions.migrations.0002_encrypt_secrets")
    with connection.schema_editor() as editor:
        migration.encrypt_all(registry, editor)
    assert stored(created["id"])[0].startswith("fernet:")
    assert Subscription.objects.get(id=created["id"]).secret == created["secret"]


def test_bad_keys_are_a_clear_configuration_error(settings):
    settings.HERALD_SECRET_KEYS = ["not-a-key"]
    with pytest.raises(ImproperlyConfigured, match="HERALD_SECRET_KEYS must be Fernet keys"):
        secrets.encrypt("whsec_x")

"""mTLS: a subscription may carry a client certificate and key (PEM, checked on upload: parses, the key matches,
valid now; the key encrypted at rest and never shown); the sender presents it to a local TLS receiver that requires
a client certificate, still pinned to the address the guard checked. Expiry is shown and warned about."""

from datetime import UTC, datetime, timedelta

import pytest
import trustme

from delivery.models import Attempt
from subscriptions.models import Subscription
from tests.conftest import drain, publish
from tests.delivery.transport.test_ssrf import tls_server
from tests.delivery.web.api.test_secrets_at_rest import dump

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ca():
    return trustme.CA()


@pytest.fixture
def mtls_receiver(ca, tmp_path, monkeypatch, settings):
    """An HTTPS receiver for hooks.test that refuses any client without a certificate from `ca`."""
    server = tls_server(ca, tmp_path, monkeypatch, settings, require_client_certificate=True)
    yield server
    server.close()


def pems(leaf) -> tuple[str, str]:
    return leaf.cert_chain_pems[0].bytes().decode(), leaf.private_key_pem.bytes().decode()


def test_the_sender_presents_the_client_certificate(api, ca, mtls_receiver, redis_conn):
    certificate, key = pems(ca.issue_cert("herald-client", not_after=datetime.now(UTC) + timedelta(days=90)))
    topic = api.post("/api/topics/", {"name": "mtls"}, format="json").json()
    url = f"https://hooks.test:{mtls_receiver.server.server_address[1]}/hook"
    with_cert = api.post("/api/subscriptions/", {"topic": "mtls", "endpoint": url, "client_certificate": certificate,
                                                 "client_key": key}, format="json")
    assert with_cert.status_code == 201, with_cert.content
    body = with_cert.json()
    assert "client_key" not in body and body["client_certificate"] == certificate
    assert body["client_certificate_expires_at"].startswith((datetime.now(UTC) + timedelta(days=90)).strftime("%Y-%m"))
    for page in (api.get(f"/api/subscriptions/{body['id']}/"), api.get("/api/subscriptions/")):
        assert "PRIVATE KEY" not in page.content.decode()
    key_lines = "".join(key.splitlines()[1:-1])[:64]
    assert key_lines not in dump()  # the key is encrypted at rest

    publish(api, topic, {"n": 1})
    drain()
    request = mtls_receiver.wait_for(1)[0]
    assert request.json()["data"] == {"n": 1} and request.headers["host"].startswith("hooks.test:")

    # The same endpoint without the certificate is refused by the receiver's TLS.
    Subscription.objects.filter(id=body["id"]).update(client_certificate="", client_key="")
    publish(api, topic, {"n": 2})
    drain()
    failed = Attempt.objects.order_by("-id").first()
    assert failed.outcome != "success" and failed.error_class in ("tls", "connection"), failed.error_detail
    assert len(mtls_receiver.requests) == 1


def test_uploads_are_checked_and_name_the_field_at_fault(api, ca, receiver, admin_client):
    topic = api.post("/api/topics/", {"name": "checks"}, format="json").json()
    good_certificate, good_key = pems(ca.issue_cert("client"))
    _, other_key = pems(ca.issue_cert("someone-else"))
    expired, expired_key = pems(ca.issue_cert("old", not_before=datetime.now(UTC) - timedelta(days=30),
                                              not_after=datetime.now(UTC) - timedelta(days=1)))
    cases = [
        ({"client_certificate": good_certificate}, "client_key", "give both"),
        ({"client_certificate": "hello", "client_key": good_key}, "client_certificate", "not a PEM certificate"),
        ({"client_certificate": good_certificate, "client_key": "nope"}, "client_key", "not an unencrypted PEM"),
        ({"client_certificate": good_certificate, "client_key": other_key}, "client_key", "not the certificate's"),
        ({"client_certificate": expired, "client_key": expired_key}, "client_certificate", "expired on"),
    ]
    for extra, field, words in cases:
        response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url, **extra},
                            format="json")
        assert response.status_code == 400 and words in response.json()[field][0], (extra.keys(), response.content)
    assert not Subscription.objects.exists()  # nothing half-written

    soon, soon_key = pems(ca.issue_cert("soon", not_after=datetime.now(UTC) + timedelta(days=5)))
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                               "client_certificate": soon, "client_key": soon_key}, format="json")
    assert created.status_code == 201
    page = admin_client.get(f"/admin/herald_subscriptions/subscription/{created.json()['id']}/change/")
    assert "replace it soon" in page.content.decode()
    dashboard = admin_client.get("/dashboard/").content.decode()
    assert "Client certificates expiring within 30 days" in dashboard and receiver.url in dashboard

    removed = api.patch(f"/api/subscriptions/{created.json()['id']}/", {"client_certificate": "", "client_key": ""},
                        format="json")
    assert removed.status_code == 200 and removed.json()["client_certificate_expires_at"] is None
    assert Subscription.objects.get().client_credentials() is None

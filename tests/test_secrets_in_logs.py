"""No credential in any log line, whoever writes it (delivery/redaction.py): a run that issues every kind of secret
Herald issues or forwards (a tenant key, a portal link, a signing secret, a confirmation token, an OAuth client
secret and bearer token) through the API, the portal, a real worker and the handshake, with every logger at DEBUG,
then every line it logged is searched for each of them. A line from a logger Herald has never heard of is searched
too: the next surface is covered without being told."""

import logging
import subprocess
import sys
from secrets import token_hex
from urllib.parse import urlsplit

import pytest
import requests

from delivery.engine.accounts import confirmation, tenancy
from delivery.management import localredis
from subscriptions.models import Subscription, Tenant
from tests import fence
from tests.conftest import ROOT, publish, settle, subprocess_env, wait_until
from tests.delivery.engine.sending.test_oauth import CLIENT_SECRET, Authority, subscribe_with_oauth

pytestmark = pytest.mark.django_db(transaction=True)


def lines(caplog) -> str:
    """Every record as a handler renders it: message, traceback and stack."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(formatter.format(record) + (record.stack_info or "") for record in caplog.records)


def test_no_secret_reaches_a_log_line(api, receiver, client, caplog, settings, redis_conn):
    caplog.set_level(logging.DEBUG)
    secrets: dict[str, str] = {}

    tenant = api.post("/api/tenants/", {"external_id": "acme", "name": "Acme"}, format="json").json()
    secrets["tenant key"] = api.post(f"/api/tenants/{tenant['id']}/keys/", {"name": "ci"}, format="json").json()["key"]
    link = api.post(f"/api/tenants/{tenant['id']}/portal-link/", {}, format="json").json()
    portal = link["url"] if "url" in link else link["path"]
    secrets["portal token"] = portal.rstrip("/").rsplit("/", 1)[-1]
    assert client.get(portal).status_code == 200
    assert client.get(portal + "subscriptions/999999/").status_code == 404  # Django: "Not Found: /portal/<token>/…"
    assert client.get(portal + "no-such-page/").status_code == 404
    assert client.get(tenancy.portal_link(Tenant.objects.get(), read_only=True) + "x/").status_code == 404

    # a signing secret and an OAuth client secret and bearer, through a real in-process worker
    authority = Authority()
    receiver.script = authority.reply
    topic, created = subscribe_with_oauth(api, receiver)
    secrets["signing secret"] = created["secret"]
    secrets["client secret"] = CLIENT_SECRET
    publish(api, topic, {"n": 1})
    settle()
    assert authority.issued, "the worker fetched a bearer token"
    secrets |= {f"bearer {n}": token for n, token in enumerate(authority.issued)}

    # a confirmation token: a handshake sent, then a wrong and a right confirmation
    settings.HERALD_REQUIRE_CONFIRMATION = True
    pending = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/pending"},
                       format="json").json()
    token = confirmation.current_token(Subscription.objects.get(id=pending["id"]))
    secrets["confirmation token"] = token
    api.get(f"/api/subscriptions/confirm/?token={token}x")
    api.get(f"/api/subscriptions/confirm/?token={token}")
    secrets["api token"] = api._credentials["HTTP_AUTHORIZATION"].split()[-1]

    # a surface nobody told about secrets: its own logger, its own words, an exception carrying one
    surface = logging.getLogger("somewhere.new")
    surface.warning("calling back %s with key %s, Authorization: Bearer %s", portal, secrets["tenant key"],
                    authority.issued[0])
    try:
        raise RuntimeError(f"could not use {secrets['signing secret']} for {secrets['confirmation token']}")
    except RuntimeError:
        surface.exception("failed", stack_info=True)

    logged = lines(caplog)
    assert "Not Found: /portal/[redacted]/subscriptions/999999/" in logged  # the lines were seen, and redacted
    assert "Bearer [redacted]" in logged and "RuntimeError: could not use whsec_[redacted]" in logged
    assert {name: secret for name, secret in secrets.items() if secret in logged} == {}
    assert len(secrets) >= 7


def test_no_secret_reaches_the_output_of_gunicorn_or_a_worker(api, user, receiver, processes, tmp_path, settings):
    """The same, through the processes as the Procfile runs them: gunicorn with its access log and every logger at
    DEBUG, and an RQ worker delivering with an OAuth bearer token; their whole output is searched."""
    web_log, worker_log = tmp_path / "web.log", tmp_path / "worker.log"
    port = localredis.free_port()
    with open(web_log, "w") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "project.wsgi", "-c", "python:project.gunicorn", "--bind",
             f"127.0.0.1:{port}", "--workers", "1", "--access-logfile", "-", "--error-logfile", "-",
             "--log-level", "debug"], cwd=ROOT, env=subprocess_env(LOG_LEVEL="DEBUG"), stdout=output,
            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    fence.allow("127.0.0.1", port)  # this test's own requests to the gunicorn it started
    try:
        wait_until(lambda: _answers(base), timeout=30, interval=0.2)
        tenant = api.post("/api/tenants/", {"external_id": "acme", "name": "Acme"}, format="json").json()
        key = api.post(f"/api/tenants/{tenant['id']}/keys/", {"name": "ci"}, format="json").json()["key"]
        portal = urlsplit(tenancy.portal_link(Tenant.objects.get(id=tenant["id"]))).path
        authority = Authority()
        receiver.script = authority.reply
        topic, created = subscribe_with_oauth(api, receiver)
        token = token_hex(32)  # a confirmation token's shape, in the access log's request line
        with open(worker_log, "w") as output:
            processes.worker(output=output, LOG_LEVEL="DEBUG", RQ_LOG_LEVEL="DEBUG")
            for path in (portal, portal + "subscriptions/999999/", portal + "nowhere/",
                         f"/api/subscriptions/confirm/?token={token}"):
                requests.get(base + path, timeout=10)
            requests.get(f"{base}/api/no-such-route/", headers={"Authorization": f"Bearer {key}"}, timeout=10)
            publish(api, topic, {"n": 1})
            wait_until(lambda: any(r.path.endswith("/hook") or "/token" not in r.path for r in receiver.requests)
                       and authority.issued, timeout=30)
            processes.stop_all()
    finally:
        server.terminate()
        server.wait(20)
    logged = web_log.read_text() + worker_log.read_text()
    assert "/portal/[redacted]/subscriptions/999999/" in logged and "token=[redacted]" in logged  # lines were written
    issued = {"tenant key": key, "portal token": portal.strip("/").rsplit("/", 1)[-1], "confirmation token": token,
               "signing secret": created["secret"], "client secret": CLIENT_SECRET,
               **{f"bearer {n}": bearer for n, bearer in enumerate(authority.issued)}}
    assert {name: secret for name, secret in issued.items() if secret in logged} == {}


def _answers(base: str) -> bool:
    try:
        return requests.get(f"{base}/api/", timeout=10).status_code == 401
    except requests.RequestException:
        return False

"""A newcomer's first steps: the README walkthrough, pasted twice in a row, works against a running Herald; the demo
receiver prints each request whole (never interleaved) and verifies signatures with --secret."""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from delivery.management import localredis
from delivery.models import Delivery, Message
from delivery.rules import signing
from subscriptions.models import Subscription
from tests.conftest import ROOT, subprocess_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # base64 of 24 bytes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_receiver(processes, *args):
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log")
    process = processes.start("herald_receiver", "--port", str(port), *args, output=log)
    wait_until(lambda: "receiving webhooks" in open(log.name).read(), timeout=30)
    return port, log, process


def walkthrough() -> str:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- walkthrough -->")[1].split("<!-- /walkthrough -->")[0]
    return block.split("```sh")[1].split("```")[0]


def test_the_readme_walkthrough_pasted_twice_works(live_server, processes, user):
    token = Token.objects.create(user=user)
    port, log, _ = start_receiver(processes)
    processes.worker()
    script = (walkthrough().replace("paste-the-token-here", token.key)
              .replace("http://127.0.0.1:8000", live_server.url).replace("127.0.0.1:9000", f"127.0.0.1:{port}"))
    outputs = []
    for _ in range(2):
        run = subprocess.run(["bash", "-c", f"set -e -o pipefail\n{script}"], capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout)
    first, second = (out.splitlines() for out in outputs)
    assert '"name":"orders"' in first[0] and '"secret":"whsec_' in first[1]
    assert '"name":"orders"' in second[0] and "secret" not in second[1]  # the same subscription, no new secret
    for out in outputs:
        assert '"outcome":"delivery_created"' in out
    assert Subscription.objects.count() == 1
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 2)
    assert len(re.findall(r'"data": \{"order": 42\}|"data":\{"order":42\}', open(log.name).read())) == 2


def signed_headers(body: bytes, secret: str = SECRET, stamp: int | None = None, msg_id: str = "msg_1") -> dict:
    stamp = int(time.time()) if stamp is None else stamp
    return {"webhook-id": msg_id, "webhook-timestamp": str(stamp),
            "webhook-signature": signing.sign(secret, msg_id, stamp, body), "content-type": "application/json"}


def test_the_demo_receiver_verifies_signatures_and_prints_whole_requests(processes):
    port, log, process = start_receiver(processes, "--secret", SECRET)
    url = f"http://127.0.0.1:{port}/hook"
    good = b'{"data": "good"}'
    assert requests.post(url, data=good, headers=signed_headers(good), timeout=10).status_code == 200
    forged = requests.post(url, data=good, headers=signed_headers(good, secret="whsec_" + "A" * 32), timeout=10)
    assert forged.status_code == 401
    stale = requests.post(url, data=good, headers=signed_headers(good, stamp=int(time.time()) - 3600), timeout=10)
    assert stale.status_code == 401
    assert requests.post(url, data=good, headers={"content-type": "application/json"}, timeout=10).status_code == 401

    def send(n):
        body = b'{"n": %d, "pad": "%s"}' % (n, b"x" * 3000)
        return requests.post(url, data=body, headers=signed_headers(body, msg_id=f"msg_c{n}"), timeout=10).status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(send, range(32))) == {200}
    process.terminate()
    process.wait(10)
    text = open(log.name).read()
    blocks = [block for block in text.split("=== ") if "POST /hook" in block]
    assert len(blocks) == 36
    verdicts = [re.search(r"^signature: .*", block, re.M).group(0) for block in blocks[:4]]
    assert verdicts[0] == "signature: valid"
    assert verdicts[1] == "signature: INVALID (no signature matches the secret(s)); answering 401"
    assert re.match(r"signature: INVALID \(webhook-timestamp is \+360[01] s from now \(tolerance 300 s\)\)",
                    verdicts[2])
    assert verdicts[3].startswith("signature: INVALID (webhook-id, webhook-timestamp and webhook-signature")
    for block in blocks[4:]:  # each request whole, in one piece: its own headers, its own body, its verdict
        msg_id = re.search(r"webhook-id: (msg_c\d+)", block).group(1)
        assert block.count("webhook-id:") == 1 and block.count('"pad"') == 1
        assert f'"n": {msg_id.removeprefix("msg_c")},' in block and "signature: valid" in block


def test_check_names_what_is_wrong():
    body, now = b"{}", 1_700_000_000
    headers = signed_headers(body, stamp=now)
    args = (headers["webhook-id"], headers["webhook-timestamp"], headers["webhook-signature"], body)
    assert signing.check([SECRET], *args, now=now) is None
    assert signing.check(["whsec_" + "B" * 32, SECRET], *args, now=now) is None  # either secret of a rotation
    assert signing.check([SECRET], *args, now=now + 301) == "webhook-timestamp is +301 s from now (tolerance 300 s)"
    assert signing.check([SECRET], headers["webhook-id"], "soon", headers["webhook-signature"], body,
                         now=now) == "webhook-timestamp 'soon' is not a number of seconds"
    assert signing.check([SECRET], *args[:3], b"{ }", now=now) == "no signature matches the secret(s)"


def test_make_run_ends_with_a_banner_once_web_and_a_worker_answer(live_server, processes, django_user_model,
                                                                  caplog):
    admin = django_user_model.objects.create_superuser("admin", password="x")
    token = Token.objects.create(user=admin)
    processes.worker()
    banner = subprocess.run(
        [sys.executable, "manage.py", "herald_banner", "--exit", "--url", live_server.url, "--timeout", "60"],
        cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=90)
    assert banner.returncode == 0, banner.stderr
    lines = banner.stdout.splitlines()
    assert lines[1] == "Herald is ready."
    assert f"dashboard  {live_server.url}/dashboard/" in banner.stdout
    assert f"API token  {token.key}" in banner.stdout and "make receiver" in banner.stdout
    assert re.search(r"Redis      127\.0\.0\.1:\d+  version \d+\.\d+\.\d+  /\S*redis-server", banner.stdout)
    assert "Unauthorized" not in caplog.text  # waiting for the web server logs no 401s
    assert "--access-logfile" not in (ROOT / "Procfile").read_text()  # INFO: attempts and changes, not requests


def test_a_redis_server_installed_on_the_machine_comes_before_the_bundled_one(tmp_path, monkeypatch):
    system = tmp_path / "usr-bin"
    system.mkdir()
    installed = system / "redis-server"
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    venv_bin = Path(sys.prefix) / "bin"
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}{system}{os.pathsep}/usr/bin")  # as `make` orders it
    assert localredis.redis_server_binary() == str(installed)
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}/nonexistent")
    assert localredis.redis_server_binary() != str(installed)  # only the bundled one: that one


def test_the_demo_account_is_refused_outside_a_local_run(settings):
    """`herald_demo` makes a superuser with a known password: with DEBUG off (a deployment, a host project) it
    refuses and creates nothing."""
    settings.DEBUG = False
    with pytest.raises(CommandError, match="for local runs only"):
        call_command("herald_demo")
    assert not get_user_model().objects.filter(username="admin").exists()


def test_the_readme_tenant_block_runs_as_pasted_against_the_demo(settings, redis_conn):
    """README's tenants block, pasted into `manage.py shell` with make run's settings after what make run does
    first (herald_demo): it needs no account it does not make, and prints a portal link that opens."""
    settings.DEBUG = True
    call_command("herald_demo")
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Your customers subscribe themselves: tenants")[1].split("```python")[1].split("```")[0]
    env = subprocess_env(DJANGO_SETTINGS_MODULE="project.settings", DEBUG="1", HERALD_REQUIRE_CONFIRMATION="false",
                         HERALD_ALLOWED_NETWORKS="127.0.0.0/8,::1/128")
    pasted = subprocess.run([sys.executable, "manage.py", "shell"], input=block, cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert pasted.returncode == 0, pasted.stderr
    link = pasted.stdout.strip().splitlines()[-1]
    assert link.startswith("http://127.0.0.1:8000/portal/"), pasted.stdout  # make run's HERALD_PUBLIC_URL
    assert Client().get(urlsplit(link).path).status_code == 200
    assert set(Message.objects.values_list("tenant__external_id", "broadcast")) == {("acme", False), (None, True)}

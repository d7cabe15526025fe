"""Descriptors budgeted (issue #54): a worker raises its soft limit on open files to the hard one and sizes its sends
against what it has, so silent endpoints cannot take every descriptor. A worker started where it cannot have more
than 512 open files still gets a quiet tenant's deliveries through on their first attempt beside four owners'
silent endpoints (which would hold 640 connections open)."""

import resource
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

from delivery.models import Delivery
from tests.conftest import ROOT, client_for, publish, subprocess_env, wait_until


class SilentServer:
    """Accepts every connection and never answers; keeps them open."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.held: list = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent():
    server = SilentServer()
    yield server
    server.close()


def limited_to(files: int, hard: int | None = None):
    def apply():
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, hard or files))
    return apply


@pytest.mark.django_db(transaction=True)
def test_a_worker_under_a_small_limit_sends_a_quiet_tenant_s_first_tries_beside_silent_endpoints(
        django_user_model, api, receiver, silent, redis_conn):
    slow = {"requestPolicy": {"timeoutSeconds": 20}, "retrySchedule": {"delays": [30]}}
    for n in range(4):
        owner = client_for(django_user_model.objects.create_user(f"silent{n}", password="pw-silent-123"))
        topic = owner.post("/api/topics/", {"name": "quiet-please"}, format="json").json()
        for path in range(5):
            created = owner.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": f"{silent.url}/{path}",
                                                         "delivery_policy": slow}, format="json")
            assert created.status_code == 201, created.content
        for message in range(32):
            publish(owner, topic, message)
    log = tempfile.NamedTemporaryFile("w+", suffix=".log")
    worker = subprocess.Popen([sys.executable, "manage.py", "rqworker", "deliveries", "retries"], cwd=ROOT,
                              env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT, preexec_fn=limited_to(512))
    try:
        wait_until(lambda: len(silent.held) >= 100, timeout=60)  # the silent ones are being sent
        quiet = api.post("/api/topics/", {"name": "quiet"}, format="json").json()
        created = api.post("/api/subscriptions/", {"topic": quiet["id"], "endpoint": receiver.url}, format="json")
        assert created.status_code == 201, created.content
        for message in range(40):
            publish(api, quiet, message)

        arrived = receiver.wait_for(40, timeout=60)

        assert {request.headers["herald-attempt"] for request in arrived} == {"1"}
        wait_until(lambda: Delivery.objects.filter(subscription_id=created.json()["id"], status="succeeded").count()
                   == 40, timeout=30)
        output = open(log.name).read()
        assert "send budget 512 descriptors: 25 sends in flight, 103 stalled" in output, output[-2000:]
        assert "Too many open files" not in output
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()


@pytest.mark.django_db(transaction=True)
def test_a_worker_started_under_a_soft_limit_of_1024_raises_it_to_the_hard_one(redis_conn):
    log = tempfile.NamedTemporaryFile("w+", suffix=".log")
    worker = subprocess.Popen([sys.executable, "manage.py", "rqworker", "deliveries", "retries"], cwd=ROOT,
                              env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=limited_to(1024, hard=8192))
    try:
        wait_until(lambda: "send budget" in open(log.name).read(), timeout=60)
        assert "send budget 8192 descriptors: 512 sends in flight, 2048 stalled" in open(log.name).read()
    finally:
        worker.terminate()
        worker.wait(30)

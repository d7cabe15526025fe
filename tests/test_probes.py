"""Probes a platform deploys by (docs/deployment.md): /healthz answers while the process does, /readyz says whether
PostgreSQL, Redis and the migrations are there (503 naming what is missing, 200 again once it is back), and a
worker's and the scheduler's liveness comes from their own heartbeat (`manage.py herald_alive`), not from Redis."""

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import requests

from delivery.management import localredis
from tests import fence
from tests.conftest import ROOT, wait_until
from tests.test_dependency_outages import OwnStack


@pytest.fixture(scope="module")
def stack():
    own = OwnStack()
    own.manage("migrate", "--noinput", "-v0")
    own.env["HERALD_HEARTBEAT_DIR"] = tempfile.mkdtemp(prefix="herald-beats-")
    yield own
    own.restore()
    own.close()


def answer(url: str) -> tuple[int, dict]:
    try:
        response = requests.get(url, timeout=10, headers={"Host": "10.1.2.3:8000"})  # a pod's address
        return response.status_code, response.json()
    except requests.RequestException:
        return 0, {}


def alive(stack, kind: str, within: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "herald_alive", f"--{kind}", "--within", str(within)],
                          cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=60)


def test_healthz_and_readyz_follow_postgresql_and_redis(stack):
    port = localredis.free_port()
    fence.allow("127.0.0.1", port)
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "project.wsgi", "-c", "python:project.gunicorn",
                            "--bind", f"127.0.0.1:{port}", "--workers", "1"], cwd=ROOT, env=stack.env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answer(f"{base}/readyz")[0] == 200, timeout=60, interval=0.2)
        assert answer(f"{base}/healthz") == (200, {"status": "ok", "version": answer(f"{base}/healthz")[1]["version"]})

        stack.stop_postgres()
        status, body = answer(f"{base}/readyz")
        assert status == 503 and body["missing"] == ["PostgreSQL does not answer"]
        assert answer(f"{base}/healthz")[0] == 200  # the process is fine: nothing to restart
        stack.start_postgres()
        wait_until(lambda: answer(f"{base}/readyz")[0] == 200, timeout=60, interval=0.2)

        stack.stop_redis()
        status, body = answer(f"{base}/readyz")
        assert status == 503 and body["missing"] == ["Redis does not answer"]
        stack.start_redis()
        wait_until(lambda: answer(f"{base}/readyz") == (200, {"status": "ready", "version": body["version"]}),
                   timeout=60, interval=0.2)
    finally:
        stack.restore()
        web.terminate()
        web.wait(20)


def test_a_worker_is_alive_by_its_own_heartbeat_not_by_redis(stack):
    worker = subprocess.Popen([sys.executable, "manage.py", "rqworker", "deliveries", "retries"], cwd=ROOT,
                              env=stack.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: alive(stack, "worker").returncode == 0, timeout=60, interval=0.5)
        stack.stop_redis()  # waiting for Redis is being alive: a restart would not bring it back
        time.sleep(6)
        assert alive(stack, "worker", within=5.5).returncode == 0
        stack.start_redis()
        os.kill(worker.pid, signal.SIGSTOP)  # a wedged process beats no more
        time.sleep(6)
        stopped = alive(stack, "worker", within=5.5)
        assert stopped.returncode == 1 and f"worker {worker.pid}" in stopped.stderr
        os.kill(worker.pid, signal.SIGCONT)
        wait_until(lambda: alive(stack, "worker", within=5.5).returncode == 0, timeout=30, interval=0.5)
    finally:
        stack.restore()
        worker.terminate()
        worker.wait(30)
    assert alive(stack, "scheduler").returncode == 1  # none ran here


def test_the_scheduler_beats_from_its_loop(stack):
    cron = subprocess.Popen([sys.executable, "manage.py", "herald_cron"], cwd=ROOT, env=stack.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: alive(stack, "scheduler", within=10).returncode == 0, timeout=60, interval=0.5)
    finally:
        cron.terminate()
        cron.wait(30)

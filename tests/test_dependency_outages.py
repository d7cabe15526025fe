"""Every long-lived process outlives its dependencies going away: started while PostgreSQL, Redis or both are down,
the worker and the scheduler wait (one log line per change of state) and deliver once they are back; `make run`
keeps every process running through a Redis stop/start and a PostgreSQL restart. Each test has a PostgreSQL
cluster and a Redis of its own to stop and start (the suite's are shared)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import requests

from delivery.management import localredis
from tests.conftest import ROOT, wait_until
from tests.receiver import Receiver
from tests.stack import Postgres

SEED = """
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from delivery.engine.accounts.subscribing import subscription_create, topic_create
owner = get_user_model().objects.create_user("outage")
topic, _ = topic_create(owner=owner, name="outage")
subscription_create(topic=topic, endpoint={url!r})
print(Token.objects.create(user=owner).key)
"""
PUBLISH = "from delivery.events import publish; publish('outage', {{'n': {n}}}, owner='outage')"


class OwnStack:
    """A PostgreSQL cluster and a Redis that a test may stop and start, and the environment that points at them."""

    def __init__(self):
        self.workdir = tempfile.mkdtemp(prefix="herald-outage-")
        os.chmod(self.workdir, 0o755)
        self.postgres = Postgres(self.workdir).start()
        self.redis_port = localredis.free_port()
        self.redis_dir = os.path.join(self.workdir, "redis")
        self.redis = localredis.start(self.redis_port, self.redis_dir)
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": self.postgres.url,
                    "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0", "PYTHONUNBUFFERED": "1",
                    "HERALD_DISPATCH_INTERVAL_SECONDS": "0.5"}
        self.postgres_up = self.redis_up = True

    def manage(self, *args: str) -> str:
        run = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        return run.stdout

    def stop_redis(self) -> None:
        self.redis.terminate()
        self.redis.wait(10)
        self.redis_up = False

    def start_redis(self) -> None:
        self.redis = localredis.start(self.redis_port, self.redis_dir)
        self.redis_up = True

    def stop_postgres(self) -> None:
        self.postgres.shut_down("fast")
        self.postgres_up = False

    def start_postgres(self) -> None:
        self.postgres.start_again()
        self.postgres_up = True

    def restore(self) -> None:
        """Both running again, whatever a test left stopped."""
        if not self.postgres_up:
            self.start_postgres()
        if not self.redis_up:
            self.start_redis()

    def close(self) -> None:
        if self.redis_up:
            self.redis.terminate()
            self.redis.wait(10)
        self.postgres.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def stack():
    own = OwnStack()
    yield own
    own.close()


@pytest.fixture(scope="module")
def seeded(stack):
    """The schema, an owner with a token and one subscription of a receiver; (receiver, token)."""
    receiver = Receiver()
    stack.manage("migrate", "--noinput", "-v0")
    token = stack.manage("shell", "-c", SEED.format(url=receiver.url)).strip().splitlines()[-1]
    yield receiver, token
    receiver.close()


def start(stack, log_path: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=stack.env,
                            stdout=open(log_path, "ab"), stderr=subprocess.STDOUT)


def says(log_path: str, pattern: str) -> bool:
    return re.search(pattern, open(log_path).read()) is not None


def received_numbers(receiver) -> set[int]:
    return {request.json()["data"]["n"] for request in receiver.requests}


def stop_and_check_exit(*processes: subprocess.Popen) -> None:
    """Asked to stop, each exits by itself, cleanly, within seconds."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(20) == 0


@pytest.mark.parametrize("down", ["both", "redis", "postgres"])
def test_worker_and_scheduler_started_while_dependencies_are_down_deliver_once_they_are_back(stack, seeded, down,
                                                                                           tmp_path):
    receiver, _ = seeded
    n = {"both": 1, "redis": 2, "postgres": 3}[down]
    stack.manage("shell", "-c", PUBLISH.format(n=n))  # due now; nothing runs to send it yet
    away = {"both": ["Redis", "PostgreSQL"], "redis": ["Redis"], "postgres": ["PostgreSQL"]}[down]
    if "Redis" in away:
        stack.stop_redis()
    if "PostgreSQL" in away:
        stack.stop_postgres()
    worker_log, cron_log = str(tmp_path / "worker.log"), str(tmp_path / "cron.log")
    worker = start(stack, worker_log, "rqworker", "deliveries", "retries")
    cron = start(stack, cron_log, "herald_cron")
    try:
        for log in (worker_log, cron_log):
            for name in away:  # each says, once, what it waits for
                wait_until(lambda log=log, name=name: says(log, rf"waiting for {name} at 127\.0\.0\.1:"), timeout=60)
        time.sleep(3)  # some seconds down, with backoff
        assert worker.poll() is None and cron.poll() is None
        assert n not in received_numbers(receiver)
        if "PostgreSQL" in away:
            stack.start_postgres()
        if "Redis" in away:
            stack.start_redis()
        wait_until(lambda: n in received_numbers(receiver), timeout=60)
        for log in (worker_log, cron_log):
            for name in away:  # and, once, that it is back
                wait_until(lambda log=log, name=name: says(log, rf"{name} at 127\.0\.0\.1:\S+ answers again after"),
                           timeout=30)
                assert len(re.findall(f"waiting for {name} at", open(log).read())) == 1
        stop_and_check_exit(worker, cron)
    finally:
        for process in (worker, cron):
            if process.poll() is None:
                process.kill()
        stack.restore()


def test_a_worker_and_the_scheduler_asked_to_stop_while_waiting_exit_at_once(stack, seeded, tmp_path):
    stack.stop_redis()
    try:
        worker = start(stack, str(tmp_path / "worker.log"), "rqworker", "deliveries", "retries")
        cron = start(stack, str(tmp_path / "cron.log"), "herald_cron")
        for log in ("worker.log", "cron.log"):
            wait_until(lambda log=log: "waiting for Redis" in (tmp_path / log).read_text(), timeout=60)
        stop_and_check_exit(worker, cron)
    finally:
        stack.start_redis()


def test_the_web_server_started_while_dependencies_are_down_serves_once_they_are_back(stack, seeded, tmp_path):
    port = localredis.free_port()
    log_path = tmp_path / "web.log"
    stack.stop_redis()
    stack.stop_postgres()
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "project.wsgi", "-c", "python:project.gunicorn",
                            "--bind", f"127.0.0.1:{port}", "--workers", "2"], cwd=ROOT, env=stack.env,
                           stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    try:
        for name in ("PostgreSQL", "Redis"):
            wait_until(lambda name=name: f"waiting for {name} at" in log_path.read_text(), timeout=60)
        time.sleep(2)
        assert web.poll() is None
        with pytest.raises(requests.ConnectionError):  # it does not serve errors while it waits: it waits
            requests.get(f"http://127.0.0.1:{port}/api/", timeout=5)
        stack.start_postgres()
        stack.start_redis()

        def answers():
            try:
                return requests.get(f"http://127.0.0.1:{port}/api/", timeout=5).status_code == 401
            except requests.ConnectionError:
                return False

        wait_until(answers, timeout=60, interval=0.25)
        web.send_signal(signal.SIGTERM)
        assert web.wait(20) == 0
    finally:
        if web.poll() is None:
            web.kill()
        stack.restore()


def free_port() -> int:
    return localredis.free_port()


def test_make_run_survives_a_redis_stop_and_a_postgresql_restart(stack, seeded, tmp_path):
    receiver, token = seeded
    port = free_port()
    log_path = tmp_path / "make-run.log"
    env = {**stack.env, "DJANGO_SETTINGS_MODULE": "project.settings", "HERALD_PORT": str(port)}
    env.pop("PYTEST_CURRENT_TEST", None)
    run = subprocess.Popen(["make", "run"], cwd=ROOT, env=env, stdout=open(log_path, "wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Token {token}"}
    try:
        wait_until(lambda: "Herald is ready." in log_path.read_text(), timeout=240, interval=0.5)

        stack.stop_redis()
        wait_until(lambda: "waiting for Redis" in log_path.read_text(), timeout=60, interval=0.5)
        time.sleep(3)
        stack.start_redis()
        stack.stop_postgres()
        wait_until(lambda: "waiting for PostgreSQL" in log_path.read_text(), timeout=60, interval=0.5)
        time.sleep(2)
        stack.start_postgres()

        topic = requests.get(f"{base}/api/topics/", headers=headers, timeout=10).json()["results"][0]

        def published():
            answer = requests.post(f"{base}/api/topics/{topic['id']}/publish/", json={"payload": {"n": 100}},
                                   headers={**headers, "Idempotency-Key": "after-the-outages"}, timeout=10)
            return answer.status_code == 202  # 503 while a web worker reconnects is an answer to retry

        wait_until(published, timeout=30, interval=0.5)
        wait_until(lambda: 100 in received_numbers(receiver), timeout=60)
        assert run.poll() is None, log_path.read_text()[-3000:]
        text = log_path.read_text()
        assert "exited with code" not in text and "stopping all processes" not in text.lower(), text[-3000:]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
            try:
                run.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
        stack.restore()

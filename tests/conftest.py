import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

import django_rq
import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rq import SimpleWorker

from delivery.engine.plumbing import counters
from delivery.engine.scheduler import dispatch
from delivery.models import Delivery
from tests import fence
from tests.receiver import Receiver, Reply

# The herald_outbox fixture, as a host project gets it: by the installed package's entry point where this checkout
# was `pip install`ed (registering it here too would be a second registration), else from here.
pytest_plugins = [] if any(entry.value == "delivery.pytest_plugin"
                           for entry in entry_points(group="pytest11")) else ["delivery.pytest_plugin"]

ROOT = Path(__file__).resolve().parent.parent


# The tenant-facing flows run behind the socket fence (tests/fence.py): the web and worker code they drive in this
# process may connect to a user-chosen address only through the transport.
FENCED = ("tests/delivery/web/api/test_tenants.py", "tests/delivery/web/api/test_isolation.py",
          "tests/delivery/test_tenant_isolation.py", "tests/delivery/test_catalog_bounds.py",
          "tests/test_secrets_in_logs.py", "tests/test_socket_fence.py")


@pytest.fixture(autouse=True)
def socket_fence(request):
    if not str(request.path).endswith(FENCED):
        yield
        return
    fence.up()
    try:
        yield
    finally:
        crossed = fence.down()
    assert crossed == [], f"connections not made by the transport: {crossed}"


@pytest.fixture
def redis_conn():
    connection = django_rq.get_connection("deliveries")
    # What earlier tests counted in this process is not this test's, and a HeraldWorker an earlier test ran here
    # left the process buffering its counts: each test starts unbuffered, with an empty tally.
    counters.unbuffer()
    counters.discard()
    connection.flushdb()
    yield connection
    counters.unbuffer()
    counters.discard()
    connection.flushdb()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


other_receiver = receiver  # a second, independent receiver in the same test


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("mallory", password="pw-mallory-123")


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def api(user):
    return client_for(user)


@pytest.fixture
def other_api(other_user):
    return client_for(other_user)


def subscribe(api, receiver, policy=None, *, name="orders", **extra):
    """A topic and one subscription of `receiver` to it, made through the API: (topic, subscription)."""
    topic = api.post("/api/topics/", {"name": name}, format="json").json()
    body = {"topic": topic["id"], "endpoint": receiver.url, **extra}
    if policy is not None:
        body["delivery_policy"] = policy
    created = api.post("/api/subscriptions/", body, format="json")
    assert created.status_code == 201, created.content
    return topic, created.json()


# Short, bounded retries: a failed try is retried after 5 s, twice at most; sends time out after 2 s.
FAST = {"requestPolicy": {"timeoutSeconds": 2}, "retrySchedule": {"delays": [5]}, "retryLimits": {"maxAttempts": 2}}


@pytest.fixture
def three(api, receiver, redis_conn):
    """Three due deliveries of one subscription with the FAST policy; returns their ids."""
    topic, _ = subscribe(api, receiver, FAST)
    for n in range(3):
        publish(api, topic, n)
    return sorted(Delivery.objects.values_list("id", flat=True))


def publish(api, topic, payload=1):
    response = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": payload}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def drain(max_rounds: int = 50) -> None:
    """Run a real RQ worker in this process until both queues are empty (burst mode)."""
    connection = django_rq.get_connection("deliveries")
    queues = [django_rq.get_queue("deliveries"), django_rq.get_queue("retries")]
    worker = SimpleWorker(queues, connection=connection)
    worker.work(burst=True, max_jobs=None, logging_level="WARNING")


@pytest.fixture
def run_worker(redis_conn):
    return drain


def settle(horizon: float = 2.0, rounds: int = 20) -> None:
    """Drive an in-process worker and the dispatcher until nothing is in flight or due within `horizon` seconds."""
    for _ in range(rounds):
        drain()
        dispatch.dispatch_due()
        due = dispatch.next_due_at()
        if due is None:
            drain()
            # what that drain did may have left work due now or soon (a retry, the next message of an ordering key)
            if (not Delivery.objects.filter(status="in_flight").exists() and dispatch.next_due_at() is None
                    and not dispatch.dispatch_due()):
                return
            continue
        wait = (due - timezone.now()).total_seconds()
        if wait > horizon:
            return
        time.sleep(max(wait, 0) + 0.01)
    raise AssertionError("deliveries did not settle")


def subprocess_env(**extra) -> dict:
    """Environment for worker/cron subprocesses: the test database, the test Redis."""
    env = dict(os.environ)
    db = connection.settings_dict  # the test database, once pytest-django created it
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        PYTHONUNBUFFERED="1",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Processes:
    def __init__(self):
        self.running: list[subprocess.Popen] = []
        self.logs: list = []

    def start(self, *args, output=None, **env) -> subprocess.Popen:
        """`output`: a file that receives the process's stdout and stderr (else they go to the test's)."""
        process = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=subprocess_env(**env),
                                   stdout=output, stderr=subprocess.STDOUT if output else None)
        self.running.append(process)
        return process

    def worker(self, output=None, **env) -> subprocess.Popen:
        return self.start("rqworker", "deliveries", "retries", output=output, **env)  # HeraldWorker, from settings

    def cron(self, **env) -> subprocess.Popen:
        """The scheduler, once it dispatches: a test that times retries must not start the clock before it runs
        (on a loaded machine a process takes seconds to start)."""
        log = tempfile.NamedTemporaryFile("w+", suffix=".log")
        self.logs.append(log)
        process = self.start("herald_cron", output=log, **env)
        wait_until(lambda: "herald cron: dispatching every" in open(log.name).read() or process.poll() is not None,
                   timeout=60)
        return process

    def stop_all(self):
        for process in self.running:
            if process.poll() is None:
                process.terminate()
        for process in self.running:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def processes(redis_conn):
    group = Processes()
    yield group
    group.stop_all()


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


@pytest.fixture
def traffic(api, receiver, run_worker):
    """One subscription with a delivered message and a dead letter."""
    receiver.script = lambda request: Reply(status=500 if request.json()["data"] == "bad" else 200,
                                            body=b'{"error":"nope"}')
    topic = api.post("/api/topics/", {"name": "console", "delivery_policy": {"preset": "event-grid"}},
                     format="json").json()
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                                    "delivery_policy": {"retrySchedule": {"delays": [0.1]},
                                                                        "retryLimits": {"maxAttempts": 2}}},
                            format="json").json()
    for payload in ("good", "bad"):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": payload}, format="json")
    settle()
    return topic, subscription


def pytest_terminal_summary(terminalreporter):
    """How many of the documentation's code blocks ran (tests/test_docs.py), ran elsewhere, or are marked skip."""
    docs = sys.modules.get("tests.test_docs")
    if docs is not None and any(docs.SUMMARY.values()):
        counts = ", ".join(f"{n} {what}" for what, n in docs.SUMMARY.items())
        terminalreporter.write_line(f"documentation code blocks: {counts}")

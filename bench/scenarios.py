"""What users do, measured from the outside: `make bench`.

Its own PostgreSQL (commits durable, as in production) and Redis; gunicorn with 2 workers, 2 RQ workers and the
scheduler exactly as the Procfile runs them; publishing through the REST API; a separate asyncio receiver
(bench/receiver.py). Every figure is printed beside its ceiling, measured in the same run:

- publish, single and batch (workers stopped), beside 8 threads reading DRF's API root on the same gunicorn;
- steady publishing at fixed rates with everything running (`--only steady`): publish p50/p99, publish → receipt
  p50/p99, and the CPU per 1,000 messages;
- a backlog drained by 2 workers, beside a single-thread `requests.Session` loop to the same receiver;
- a receiver answering after 200 ms (10 endpoints, then 20), beside an asyncio client keeping 256 requests in
  flight; and one such endpoint alone (also `--only one-endpoint`), beside an asyncio client keeping the workers'
  room for it in flight (2 × HERALD_MAX_IN_FLIGHT_PER_ENDPOINT);
- one endpoint hanging until its timeout among 19 fast ones, beside the same 19 without it;
- fan-out to 10,000 subscriptions; the workers' peak RSS;
- noisy neighbour: a quiet owner's publish → receipt alone and while another owner's 40,000 deliveries drain,
  beside twice its time alone plus 50 ms; the flood's drain rate beside its rate alone;
- slow neighbours: the same quiet owner beside another's hanging confirmation handshakes, and beside its
  subscriptions whose token URL answers after 9 s, beside twice its time alone;
- silent tenant: a tenant publishing every 0.4 s beside another tenant's 20 endpoints that accept and never
  answer (4,000 deliveries for them), beside twice its time alone plus 50 ms;
- silent tenants (`--only silent-tenants`): eight tenants' 20 silent endpoints each, past both workers' bound on
  stalled sends, beside a neighbour tenant answering in 3 s (all its deliveries must succeed on their one attempt)
  and a quiet tenant publishing every 0.4 s, beside twice its time alone plus 50 ms;
- scale-out: REST publish with 1, 2 and 4 gunicorn workers, and the drain with 1, 2 and 4 RQ workers, each beside
  the figure with one;
- cpu (`--only cpu`): the REST publish and the drain alone, with their CPU, for an A/B of one change;
- web floor (`--only web-floor`): the web's CPU per request at 100 requests/s for gunicorn alone (an application
  answering `{}`), then /healthz, two authenticated reads and the REST publish on Herald's gunicorn: what the
  publish costs beyond any authenticated request;
- tracing (`--only tracing`): REST publish and a drain without the OpenTelemetry packages, with them but
  tracing off, and tracing on (OTLP to a local sink), each beside the one before.
Beside the publish, drain and 200 ms figures: the CPU seconds per 1,000 publishes or deliveries of each process
kind (web, worker, scheduler, PostgreSQL) and of what shares the machine with them here (Redis, the receiver, this
script: its client threads and bookkeeping), read from /proc over the same span.

    python bench/scenarios.py [--quick] [--json FILE] [--chart FILE]
                               [--only cpu|one-endpoint|slow-endpoints|scale-out|noisy-neighbour|slow-neighbours|
                                       silent-tenant|silent-tenants|steady|tracing|web-floor]
"""

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from delivery.conf import DEFAULTS  # noqa: E402
from delivery.management import localredis  # noqa: E402
from tests.stack import Postgres  # noqa: E402

THREADS = 8
FAST_POLICY = {"requestPolicy": {"timeoutSeconds": 5}, "retrySchedule": {"delays": [1]},
               "retryLimits": {"maxAttempts": 3}}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


TICKS = os.sysconf("SC_CLK_TCK")


def process_tree_cpu(roots: list[int]) -> float:
    """CPU seconds (user + system) spent so far by the processes `roots` and all their descendants, those still
    running and those they have reaped (a PostgreSQL backend that ended, a gunicorn worker replaced)."""
    children: dict[int, list[int]] = {}
    spent: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        spent[pid] = sum(int(value) for value in fields[11:15]) / TICKS  # utime, stime, cutime, cstime
    total, stack = 0.0, list(roots)
    while stack:
        pid = stack.pop()
        total += spent.get(pid, 0.0)
        stack += children.get(pid, [])
    return total


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {kind: after[kind] - before[kind] for kind in after}


def per_thousand(cpu: dict[str, float], count: int) -> dict[str, float]:
    """CPU seconds per 1,000 deliveries (or publishes), by process kind, as a row's fields."""
    return {f"cpu_s_per_1000_{kind}": round(seconds * 1000 / count, 3) for kind, seconds in cpu.items()}


def cpu_line(cpu: dict[str, float], count: int, what: str) -> str:
    return f"{'':<52}CPU s per 1,000 {what}: " + ", ".join(
        f"{kind} {seconds * 1000 / count:.2f}" for kind, seconds in cpu.items())


class Bench:
    def __init__(self, workdir: str):
        self.workdir = workdir
        self.postgres = Postgres(os.path.join(workdir, "pg"), durable_commits=True).start()
        self.redis_port = localredis.free_port()
        self.redis = localredis.start(self.redis_port, os.path.join(workdir, "redis"))
        self.web_port = localredis.free_port()
        self.receiver_port = localredis.free_port()
        self.received_log = os.path.join(workdir, "received.log")
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "DATABASE_URL": self.postgres.url,
                    "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0", "SECRET_KEY": "bench",
                    "HERALD_REQUIRE_CONFIRMATION": "false", "HERALD_ALLOWED_NETWORKS": "127.0.0.0/8",
                    "HERALD_PUBLISH_RATE": "100000000/min", "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1",
                    "LOG_LEVEL": "WARNING", "RQ_LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}
        self.base_env = dict(self.env)
        self.manage("migrate", "--noinput", "-v0")
        self.token = self.django("""
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user, _ = get_user_model().objects.get_or_create(username="bench")
print(Token.objects.get_or_create(user=user)[0].key)""").strip().splitlines()[-1]
        self.receiver = subprocess.Popen([sys.executable, str(ROOT / "bench" / "receiver.py"),
                                          str(self.receiver_port), self.received_log], stdout=subprocess.PIPE)
        self.receiver.stdout.readline()
        self.web = self.start_web()
        self.api = f"http://127.0.0.1:{self.web_port}/api"
        self.wait_for_web()
        self.engine: list[subprocess.Popen] = []
        self.receivers: list[subprocess.Popen] = []  # more receivers (other tenants' servers)
        self.peak_rss_kb = 0
        self.db = None

    # --- processes -------------------------------------------------------------------------------------------
    def manage(self, *args: str) -> str:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True,
                              capture_output=True, text=True).stdout

    def django(self, code: str) -> str:
        return self.manage("shell", "--no-imports", "-c", code)

    def spawn(self, *args: str) -> subprocess.Popen:
        log = open(os.path.join(self.workdir, "processes.log"), "a")
        return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=self.env, stdout=log, stderr=log)

    def start_web(self, workers: int = 2) -> subprocess.Popen:
        """gunicorn as the Procfile runs it (2 workers unless asked)."""
        return self.spawn("-m", "gunicorn", "project.wsgi", "-c", "python:project.gunicorn", "--bind",
                          f"127.0.0.1:{self.web_port}", "--workers", str(workers))

    def restart_web(self, workers: int = 2, **env: str) -> None:
        """gunicorn again, with `env` over the usual environment (the engine started later gets it too)."""
        self.web.terminate()
        self.web.wait(30)
        self.env = {**self.base_env, **env}
        self.web = self.start_web(workers)
        self.wait_for_web()

    def cpu(self) -> dict[str, float]:
        """CPU seconds spent so far by each kind of process: web (gunicorn), worker, scheduler, PostgreSQL; and
        what shares the machine with them here: Redis, the receiver, and this script ("bench": its client threads
        and its own bookkeeping)."""
        with open(os.path.join(self.postgres.data, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        return {"web": process_tree_cpu([self.web.pid]),
                "worker": process_tree_cpu([p.pid for p in self.engine[:-1]]),
                "scheduler": process_tree_cpu([p.pid for p in self.engine[-1:]]),
                "postgres": process_tree_cpu([postmaster]),
                "redis": process_tree_cpu([self.redis.pid]),
                "receiver": process_tree_cpu([self.receiver.pid, *(p.pid for p in self.receivers)]),
                "bench": time.process_time()}

    def wait_for_web(self, url: str | None = None) -> None:
        for _ in range(200):
            try:
                requests.get(url or f"{self.api}/", timeout=1)
                return
            except requests.RequestException:  # not listening yet, or too busy starting to answer within 1 s
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not start")

    def start_engine(self, workers: int = 2) -> None:
        """Workers (2 unless asked) and the scheduler, after a checkpoint: what the previous scenario wrote is
        flushed now, not in the middle of the next measurement."""
        self.count("SELECT 1")  # opens the connection if needed
        self.db.execute("CHECKPOINT")
        self.engine = [self.spawn("manage.py", "rqworker", "deliveries", "retries") for _ in range(workers)]
        self.engine.append(self.spawn("manage.py", "herald_cron"))

    def stop_engine(self) -> None:
        for process in self.engine[:-1]:
            self.peak_rss_kb = max(self.peak_rss_kb, peak_rss_kb(process.pid))
        for process in self.engine:
            process.terminate()
        for process in self.engine:
            process.wait(90)
        self.engine = []

    def close(self) -> None:
        if self.engine:
            self.stop_engine()
        for process in (self.web, self.receiver, *self.receivers):
            process.terminate()
            process.wait(30)
        if self.db is not None:
            self.db.close()
        self.redis.terminate()
        self.redis.wait(10)
        self.postgres.stop()

    # --- data ------------------------------------------------------------------------------------------------
    def reset(self, subscriptions: dict[str, int], policy: dict | None = None) -> int:
        """A fresh topic with `count` subscriptions per receiver path prefix; returns the topic id."""
        spec = json.dumps({"subs": subscriptions, "policy": policy or FAST_POLICY})
        out = self.django(f"""
import json, django_rq
from django.db import connection
from subscriptions.models import Endpoint, Subscription, Topic
from django.contrib.auth import get_user_model
spec = json.loads({spec!r})
with connection.cursor() as c:
    c.execute("TRUNCATE herald_delivery_attempt, herald_delivery_delivery, herald_delivery_message, "
              "herald_subscriptions_subscription, herald_subscriptions_endpointtransition, "
              "herald_subscriptions_endpointwindowbucket, herald_subscriptions_endpoint, herald_subscriptions_topic "
              "CASCADE")
    # The planner's statistics of what was truncated (a million rows in one scenario) would otherwise shape the
    # next scenario's plans: the ten 200 ms endpoints' PostgreSQL CPU doubled after that one. Forgotten, not taken
    # again of the empty tables: TRUNCATE leaves them as never analyzed (key lookups by index, as on a new
    # install), where an ANALYZE of empty tables made each connection's foreign-key checks, planned while a table
    # was a page long, read the whole growing table on every insert (docs/benchmarks.md, "The steady rate").
    c.execute("DELETE FROM pg_statistic WHERE starelid = ANY(ARRAY['herald_delivery_attempt', "
              "'herald_delivery_delivery', 'herald_delivery_message', 'herald_subscriptions_subscription', "
              "'herald_subscriptions_endpoint', 'herald_subscriptions_topic']::regclass[])")
django_rq.get_connection("deliveries").flushdb()
user = get_user_model().objects.get(username="bench")
topic = Topic.objects.create(owner=user, name="bench")
endpoints = Endpoint.objects.bulk_create([Endpoint(owner=user, url=f"http://127.0.0.1:{self.receiver_port}/{{p}}/{{n}}")
                                          for p, count in spec["subs"].items() for n in range(count)])
Subscription.objects.bulk_create([Subscription(topic=topic, endpoint=e, status="confirmed",
                                               delivery_policy=spec["policy"]) for e in endpoints], batch_size=2000)
print(topic.id)""")
        open(self.received_log, "w").close()
        return int(out.strip().splitlines()[-1])

    def count(self, sql: str) -> int:
        return self.db_execute(sql).fetchone()[0]

    def succeeded(self, path_prefix: str | None = None) -> int:
        return self._succeeded(self._endpoints(path_prefix))[0]

    def _endpoints(self, path_prefix: str | None) -> list[int] | None:
        """The ids of the endpoints under `path_prefix` (None: every endpoint)."""
        if path_prefix is None:
            return None
        return [row[0] for row in self.db_execute("SELECT id FROM herald_subscriptions_endpoint WHERE url LIKE %s",
                                                  [f"%/{path_prefix}/%"])]

    def _succeeded(self, endpoints: list[int] | None, select: str = "count(*)", after: str = "", *params):
        """`select` over the succeeded rows (of `endpoints`), `after` the WHERE clause (with `params`): its row."""
        where = "" if endpoints is None else " AND endpoint_id = ANY(%s)"
        return self.db_execute(f"SELECT {select} FROM herald_delivery_delivery WHERE status = 'succeeded'{where}"
                               f"{after}", [*([] if endpoints is None else [endpoints]), *params]).fetchone()

    def in_flight(self) -> dict:
        """Requests in flight over the last drain, from its attempt rows (started, took): the average between the
        first start and the last answer, and the peak."""
        rows = self.db_execute("SELECT extract(epoch FROM started_at)::float8, duration_ms FROM herald_delivery_attempt"
                               ).fetchall()
        if not rows:
            return {}
        events = sorted([(start, 1) for start, _ in rows] + [(start + took / 1000, -1) for start, took in rows])
        level, last, area, peak = 0, events[0][0], 0.0, 0
        for moment, change in events:
            area += level * (moment - last)
            last, level = moment, level + change
            peak = max(peak, level)
        return {"in_flight_avg": round(area / max(events[-1][0] - events[0][0], 1e-9)), "in_flight_peak": peak}

    def db_execute(self, sql: str, params: list | None = None):
        if self.db is None:
            self.db = psycopg.connect(self.postgres.url, autocommit=True)
        return self.db.execute(sql, params)

    def add_backlog(self, topic: int, count: int) -> str:
        """`count` pending deliveries due in a day for the topic's first subscription; returns the plan of the
        workers' due-work query (EXPLAIN ANALYZE) with them in the table."""
        subscription, endpoint = self.db_execute(
            "SELECT id, endpoint_id FROM herald_subscriptions_subscription WHERE topic_id = %s LIMIT 1",
            [topic]).fetchone()
        self.db.execute(
            """INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type, subject,
                                             attributes,
                                             published_at, request_fingerprint, fanout_pending)
               SELECT gen_random_uuid(), %s, '1', false, 'backlog', '', '{}', now(), '', false
               FROM generate_series(1, %s)""", [topic, count])
        self.db.execute(
            """INSERT INTO herald_delivery_delivery (message_id, subscription_id, endpoint_id, owner_id, status,
                                              next_attempt_at, attempt_count, budget_attempts, dead_letter_reason,
                                              created_at)
               SELECT m.id, %s, %s, t.owner_id, 'pending', now() + interval '1 day', 0, 0, '', now()
               FROM herald_delivery_message m JOIN herald_subscriptions_topic t ON t.id = m.topic_id
               WHERE m.event_type = 'backlog'""", [subscription, endpoint])
        self.db.execute("ANALYZE herald_delivery_delivery")
        rows = self.db.execute(
            """EXPLAIN (ANALYZE, BUFFERS) SELECT id, endpoint_id FROM herald_delivery_delivery
               WHERE status = 'pending' AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT 1024""")
        return "\n".join(line for (line,) in rows)

    def received(self, log: str | None = None) -> list[tuple[float, str, str]]:
        with open(log or self.received_log) as f:
            return [(float(t), i, p) for t, i, p in (line.split() for line in f if line.strip())]

    def wait_delivered(self, expected: int, *, prefix: str | None = None, timeout: float = 600,
                       cpu: dict | None = None) -> float:
        """Seconds from the first request the receiver saw until `expected` deliveries (of endpoints under
        `prefix`) had succeeded (the `expected`-th one's `finished_at`): the engine's start-up (imports,
        connections) is not part of a drain. `cpu`, if given, gets each process kind's CPU seconds from the first
        receipt seen to the look that saw the last success. The looks are spaced by a quarter of the time the drain
        has left at its rate so far (50 ms to 1 s): each counts every row that succeeded, and at 20 looks a second
        those counts cost PostgreSQL up to half a core beside what is measured."""
        started, started_at = time.perf_counter(), time.time()
        endpoints = self._endpoints(prefix)
        at_first = None
        done = before = self._succeeded(endpoints)[0]
        while done < expected:
            elapsed = time.perf_counter() - started
            if elapsed > timeout:
                raise RuntimeError(f"only {done}/{expected} delivered in {timeout} s")
            if cpu is not None and at_first is None:
                if os.path.getsize(self.received_log):
                    at_first = self.cpu()
                else:
                    time.sleep(0.05)
                    done = self._succeeded(endpoints)[0]
                    continue
            left = (expected - done) * elapsed / (done - before) if done > before else 1.0
            time.sleep(min(1.0, max(0.05, left / 4)))
            done = self._succeeded(endpoints)[0]
        if cpu is not None:
            cpu.update(spent(at_first or self.cpu(), self.cpu()))
        finished = self._succeeded(endpoints, "extract(epoch FROM finished_at)",  # the `expected`-th success
                                   " ORDER BY finished_at OFFSET %s LIMIT 1", max(0, expected - 1))
        end = float(finished[0]) if finished else time.time()
        return end - min((t for t, _, _ in self.received()), default=started_at)

    def drain(self, count: int, workers: int = 2, subscriptions: dict | None = None) -> tuple[float, dict[str, float]]:
        """A fresh topic with one fast endpoint (or `subscriptions`, as `reset` takes them), `count` messages
        published in batches (how the backlog came about is not what is measured), drained by the engine: (seconds
        from the first receipt to the last success, the CPU seconds of each process kind over the same span)."""
        topic = self.reset(subscriptions or {"fast": 1})
        self.publish_many(topic, count, batch=100)
        self.start_engine(workers)
        cpu: dict[str, float] = {}
        seconds = self.wait_delivered(count, cpu=cpu)
        self.stop_engine()
        return seconds, cpu

    # --- clients ---------------------------------------------------------------------------------------------
    def session(self, token: str | None = None) -> requests.Session:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token or self.token}"
        return session

    def own_receiver(self) -> tuple[int, str]:
        """A receiver process of its own (another tenant's server): (port, its log)."""
        port, log = localredis.free_port(), os.path.join(self.workdir, f"received-{len(self.receivers)}.log")
        process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "receiver.py"), str(port), log],
                                   stdout=subprocess.PIPE)
        process.stdout.readline()
        self.receivers.append(process)
        return port, log

    def other_owner(self, name: str, path: str, port: int | None = None) -> tuple[int, str]:
        """A second owner with a topic of its own and one subscription of `path` on the receiver at `port` (the
        shared one if not given): (topic, token)."""
        out = self.django(f"""
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from subscriptions.models import Endpoint, Subscription, Topic
user, _ = get_user_model().objects.get_or_create(username={name!r})
topic = Topic.objects.create(owner=user, name={name!r})
endpoint = Endpoint.objects.create(owner=user, url="http://127.0.0.1:{port or self.receiver_port}/{path}/0")
Subscription.objects.create(topic=topic, endpoint=endpoint, status="confirmed", delivery_policy={FAST_POLICY!r})
print(topic.id, Token.objects.get_or_create(user=user)[0].key)""")
        topic, token = out.strip().splitlines()[-1].split()
        return int(topic), token

    def warm_up(self, topic: int, token: str, log: str) -> None:
        """One message through the running engine, waited for: a worker's first job is not in the figures."""
        open(log, "w").close()  # what an earlier run received is not this warm-up's answer
        self.session(token).post(f"{self.api}/topics/{topic}/publish/", json={"payload": "warm-up"}, timeout=30)
        deadline = time.time() + 30
        while not self.received(log) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        open(log, "w").close()

    def publish_many(self, topic: int, count: int, *, batch: int = 0, threads: int = THREADS
                     ) -> tuple[float, list[float]]:
        """Publish `count` messages from `threads` threads as fast as they go; (msgs/s, latencies in ms)."""
        latencies: list[float] = []
        sessions = threading.local()
        url = f"{self.api}/topics/{topic}/publish{'-batch' if batch else ''}/"

        def one(n: int) -> None:
            session = getattr(sessions, "s", None) or self.session()
            sessions.s = session
            body = ({"entries": [{"id": str(k), "payload": {"n": n, "k": k}} for k in range(batch)]} if batch
                    else {"payload": {"n": n}})
            began = time.perf_counter()
            response = session.post(url, json=body, timeout=30)
            latencies.append((time.perf_counter() - began) * 1000)
            response.raise_for_status()

        calls = count // batch if batch else count
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(calls)))
        return calls * (batch or 1) / (time.perf_counter() - started), latencies

    def at_rate(self, method: str, url: str, rate: float, seconds: float) -> tuple[dict[str, float], int]:
        """`method` `url` at `rate` requests/s (open loop, 32 client threads, a session each), each answered 2xx:
        (CPU seconds spent meanwhile by each process kind, requests made). A publish's body is a small payload."""
        sessions = threading.local()

        def one(n: int) -> None:
            session = getattr(sessions, "s", None) or self.session()
            sessions.s = session
            body = {"json": {"payload": {"n": n}}} if method == "post" else {}
            session.request(method, url, timeout=30, **body).raise_for_status()

        for n in range(50):  # both gunicorn workers warm for this request
            one(n)
        total, before = int(rate * seconds), self.cpu()
        futures, _ = paced(one, rate, total)
        cpu = spent(before, self.cpu())
        for future in futures:
            future.result()  # a request that failed fails the figure
        return cpu, total

    def api_root_rate(self, seconds: float = 5) -> float:
        """Ceiling for publishing: THREADS threads reading DRF's API root (auth, routing, JSON) on this gunicorn."""
        done = [0]
        until = time.perf_counter() + seconds

        def loop() -> None:
            session = self.session()
            while time.perf_counter() < until:
                session.get(f"{self.api}/", timeout=10).raise_for_status()
                done[0] += 1

        threads = [threading.Thread(target=loop) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return done[0] / seconds

    def steady(self, topic: int, rate: float, seconds: float, *, token: str | None = None,
               prefix: str | None = None, log: str | None = None, tenant: str | None = None) -> dict:
        """Publish at `rate` msgs/s (open loop) with the engine running; latencies of publish and of receipt (of
        the endpoints under `prefix`, if given, while others may be receiving too)."""
        publish_ms: list[float] = []
        sent_at: dict[str, float] = {}
        sessions = threading.local()
        lock = threading.Lock()

        def one(n: int) -> None:
            session = getattr(sessions, "s", None) or self.session(token)
            sessions.s = session
            began = time.time()
            body = {"payload": {"n": n}, **({"tenant": tenant} if tenant else {})}
            response = session.post(f"{self.api}/topics/{topic}/publish/", json=body, timeout=30)
            with lock:
                publish_ms.append((time.time() - began) * 1000)
                sent_at[response.json()["message_id"]] = began

        total = int(rate * seconds)
        _, elapsed = paced(one, rate, total)
        achieved = total / elapsed
        self.wait_delivered(total, prefix=prefix, timeout=120)
        receipt_ms = [(t - sent_at[i]) * 1000 for t, i, _ in self.received(log) if i in sent_at]
        return {"target": rate, "achieved": round(achieved, 1), "publish_p50_ms": round(pct(publish_ms, 0.5), 1),
                "publish_p99_ms": round(pct(publish_ms, 0.99), 1),
                "receipt_p50_ms": round(pct(receipt_ms, 0.5), 1), "receipt_p99_ms": round(pct(receipt_ms, 0.99), 1)}


def paced(one, rate: float, total: int) -> tuple[list, float]:
    """`one(n)` for each n below `total`, started at `rate` a second on 32 threads (open loop: a slow answer does
    not hold the next start back): (their futures, seconds from the first start until the last one ended)."""
    started = time.perf_counter()
    with ThreadPoolExecutor(32) as pool:
        futures = []
        for n in range(total):
            time.sleep(max(0.0, started + n / rate - time.perf_counter()))
            futures.append(pool.submit(one, n))
    return futures, time.perf_counter() - started


def requests_loop_rate(url: str, count: int = 3000) -> float:
    session = requests.Session()
    body = json.dumps({"specversion": "1.0", "data": {"n": 1}}).encode()
    started = time.perf_counter()
    for _ in range(count):
        session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=5).raise_for_status()
    return count / (time.perf_counter() - started)


def asyncio_rate(url: str, count: int, in_flight: int = 256) -> float:
    async def run() -> float:
        limit = asyncio.Semaphore(in_flight)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as session:
            async def one() -> None:
                async with limit, session.post(url, data=b"{}") as response:
                    await response.read()
            started = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(count)))
            return count / (time.perf_counter() - started)
    return asyncio.run(run())


def peak_rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def reporter(rows: list[dict]):
    def row(name, value, unit, ceiling=None, ceiling_name="", **extra):
        entry = {"scenario": name, "value": round(value, 1), "unit": unit, "ceiling": ceiling and round(ceiling, 1),
                 "ceiling_name": ceiling_name, **extra}
        ratio = f"  = {value / ceiling:.2f}× {ceiling_name} ({ceiling:,.0f})" if ceiling else ""
        print(f"{name:<52}{value:>10,.1f} {unit}{ratio}", flush=True)
        rows.append(entry)
    return row


def noisy_neighbour(bench: Bench, quick: bool) -> list[dict]:
    """A quiet owner publishing 5 msgs/s to a server of its own, alone and while another owner's flood of 2,000
    messages × 20 endpoints (40,000 deliveries) drains; the flood's drain rate beside its rate with nobody else
    publishing. (The quiet owner's receiver is its own process: on the flood's receiver its requests would queue
    behind the flood's in that server, which is the receiver's capacity, not Herald's fairness.) Each quiet run
    starts after a warm-up message, so a worker's first job is not in the figures."""
    rows: list[dict] = []
    row = reporter(rows)
    messages, endpoints = int(2000 * (0.3 if quick else 1.0)), 20

    def flood() -> int:
        topic = bench.reset({"flood": endpoints})
        bench.publish_many(topic, messages, batch=100)
        return messages * endpoints

    flood_total = flood()  # the flood alone
    bench.start_engine()
    alone_rate = flood_total / bench.wait_delivered(flood_total, prefix="flood")
    bench.stop_engine()
    port, log = bench.own_receiver()

    bench.reset({"flood": endpoints})  # the quiet owner alone
    quiet, token = bench.other_owner("quiet", "quiet", port)
    bench.start_engine()
    bench.warm_up(quiet, token, log)
    baseline = bench.steady(quiet, 5, 20, token=token, prefix="quiet", log=log)
    bench.stop_engine()
    flood_total = flood()  # both: the flood queued, then the quiet owner publishes while it drains
    quiet, token = bench.other_owner("quiet2", "quiet", port)
    bench.start_engine()
    bench.warm_up(quiet, token, log)  # the workers up and the flood draining (it takes tens of seconds)
    during = bench.steady(quiet, 5, 20, token=token, prefix="quiet", log=log)
    waits = bench.db.execute(
        """SELECT extract(epoch FROM a.started_at - m.published_at) * 1000, a.duration_ms
           FROM herald_delivery_attempt a JOIN herald_delivery_delivery d ON d.id = a.delivery_id
           JOIN herald_delivery_message m ON m.id = d.message_id JOIN auth_user u ON u.id = d.owner_id
           WHERE u.username = 'quiet2' AND a.number = 1 AND m.payload <> '"warm-up"'::jsonb""").fetchall()
    during_rate = flood_total / bench.wait_delivered(flood_total, prefix="flood")
    bench.stop_engine()
    claim_ms, send_ms = [float(w) for w, _ in waits], [float(d) for _, d in waits]
    print(f"{'':<52}beside the flood: publish p50/p99 {during['publish_p50_ms']}/{during['publish_p99_ms']} ms; "
          f"published → sent p50/p99 {pct(claim_ms, 0.5):.0f}/{pct(claim_ms, 0.99):.0f} ms; "
          f"send p50/p99 {pct(send_ms, 0.5):.0f}/{pct(send_ms, 0.99):.0f} ms")
    row("quiet owner publish→receipt p99, alone", baseline["receipt_p99_ms"], "ms",
        p50_ms=baseline["receipt_p50_ms"])
    row(f"quiet owner publish→receipt p99, beside {flood_total:,} of another's", during["receipt_p99_ms"], "ms",
        2 * baseline["receipt_p99_ms"] + 50, "2× alone + 50 ms", p50_ms=during["receipt_p50_ms"])
    print(f"{'':<52}p50 alone {baseline['receipt_p50_ms']} ms, beside the flood {during['receipt_p50_ms']} ms")
    row(f"flood of {flood_total:,} drained beside the quiet owner", during_rate, "deliveries/s", alone_rate,
        "the flood alone")
    return rows


def slow_neighbours(bench: Bench, quick: bool) -> list[dict]:
    """Another owner's slow parts beside a quiet owner publishing 5 msgs/s to a server of its own: (a) three
    confirmation handshakes to a URL that accepts and never answers, asked again every 10 s; (b) four
    subscriptions whose OAuth2 token URL answers after 9 s (with a token too short-lived to cache), published to
    once a second. The quiet owner's publish → receipt beside each, and alone, in the same run."""
    rows: list[dict] = []
    row = reporter(rows)
    seconds = 20 * (0.5 if quick else 1.0)
    port, log = bench.own_receiver()
    bench.reset({"fast": 1})
    quiet, token = bench.other_owner("calm", "calm", port)
    bench.start_engine()
    bench.warm_up(quiet, token, log)
    alone = bench.steady(quiet, 5, seconds, token=token, prefix="calm", log=log)
    policy = {"requestPolicy": {"timeoutSeconds": 15}}
    base = f"http://127.0.0.1:{bench.receiver_port}"
    noisy = bench.django(f"""
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from subscriptions.models import Endpoint, Subscription, Topic
user, _ = get_user_model().objects.get_or_create(username="slow")
topic = Topic.objects.create(owner=user, name="slow")
for n in range(3):
    Subscription.objects.create(topic=topic, status="pending_confirmation",
                                endpoint=Endpoint.objects.create(owner=user, url=f"{base}/hang/{{n}}"))
for n in range(4):
    Subscription.objects.create(topic=topic, status="confirmed", delivery_policy={policy!r},
                                endpoint=Endpoint.objects.create(owner=user, url=f"{base}/fast/t{{n}}"),
                                oauth_token_url=f"{base}/late-token/{{n}}",
                                oauth_client_id="slow", oauth_client_secret="s")
print(topic.id, Token.objects.get_or_create(user=user)[0].key)""").strip().splitlines()[-1].split()
    slow_topic, slow_token = int(noisy[0]), noisy[1]
    stop = threading.Event()

    def handshakes() -> None:  # asked again every 10 s, so one is always hanging
        while not stop.is_set():
            bench.django("""
from delivery.engine.accounts.confirmation import confirmation_request
from subscriptions.models import Subscription
for s in Subscription.objects.filter(status="pending_confirmation"):
    confirmation_request(subscription=s)""")
            stop.wait(10)

    def tokens() -> None:
        session = bench.session(slow_token)
        while not stop.is_set():
            session.post(f"{bench.api}/topics/{slow_topic}/publish/", json={"payload": 1}, timeout=30)
            stop.wait(1)

    figures = {}
    for name, load in (("three hanging confirmation handshakes", handshakes),
                       ("four subscriptions with a 9 s token URL", tokens)):
        stop.clear()
        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        time.sleep(3)  # the slow requests are on their way
        open(log, "w").close()
        figures[name] = bench.steady(quiet, 5, seconds, token=token, prefix="calm", log=log)
        stop.set()
        thread.join()
    bench.stop_engine()
    row("quiet owner publish→receipt p99, alone (slow neighbours)", alone["receipt_p99_ms"], "ms",
        p50_ms=alone["receipt_p50_ms"])
    for name, during in figures.items():
        row(f"quiet owner publish→receipt p99, beside {name}", during["receipt_p99_ms"], "ms",
            2 * alone["receipt_p99_ms"], "2× alone", p50_ms=during["receipt_p50_ms"])
        print(f"{'':<52}p50 alone {alone['receipt_p50_ms']} ms, beside {during['receipt_p50_ms']} ms")
    return rows


def quiet_tenant_alone(bench: Bench, topic: int, token: str, log: str, seconds: float):
    """The engine started, a warm-up publish of tenant `quiet` received, then its steady publishing alone, before
    anyone else's load: (the owner's session, the figures alone)."""
    bench.start_engine()
    session = bench.session(token)
    open(log, "w").close()
    session.post(f"{bench.api}/topics/{topic}/publish/", json={"payload": "warm-up", "tenant": "quiet"}, timeout=30)
    deadline = time.time() + 30
    while not bench.received(log) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1)
    open(log, "w").close()
    return session, bench.steady(topic, 2.5, seconds, token=token, prefix="calm", log=log, tenant="quiet")


def silent_tenant(bench: Bench, quick: bool) -> list[dict]:
    """Send slots in shares: one tenant's 20 endpoints accept connections and never answer (a customer whose
    firewall drops packets), with 4,000 deliveries queued for them, beside another tenant of the same owner
    publishing every 0.4 s to a server of its own. The quiet tenant's publish → receipt p99 beside them, and alone
    in the same run, beside twice its time alone plus 50 ms."""
    rows: list[dict] = []
    row = reporter(rows)
    seconds = 30 * (0.5 if quick else 1.0)
    port, log = bench.own_receiver()
    bench.reset({"fast": 1})
    base = f"http://127.0.0.1:{bench.receiver_port}"
    made = bench.django(f"""
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from subscriptions.models import Endpoint, Subscription, Tenant, Topic
user, _ = get_user_model().objects.get_or_create(username="saas")
topic = Topic.objects.create(owner=user, name="saas", open_to_tenants=True)
silent = Tenant.objects.create(owner=user, external_id="silent", name="Silent")
quiet = Tenant.objects.create(owner=user, external_id="quiet", name="Quiet")
for n in range(20):
    Subscription.objects.create(topic=topic, tenant=silent, status="confirmed",
                                delivery_policy={{"requestPolicy": {{"timeoutSeconds": 15}}}},
                                endpoint=Endpoint.objects.create(owner=user, tenant=silent, url=f"{base}/hang/{{n}}"))
Subscription.objects.create(topic=topic, tenant=quiet, status="confirmed", delivery_policy={FAST_POLICY!r},
                            endpoint=Endpoint.objects.create(owner=user, tenant=quiet,
                                                             url="http://127.0.0.1:{port}/calm/0"))
print(topic.id, Token.objects.get_or_create(user=user)[0].key)""").strip().splitlines()[-1].split()
    topic, token = int(made[0]), made[1]
    session, alone = quiet_tenant_alone(bench, topic, token, log, seconds)
    for start in range(0, 200, 50):  # 200 messages × 20 silent endpoints
        session.post(f"{bench.api}/topics/{topic}/publish-batch/", timeout=60, json={
            "entries": [{"id": str(n), "payload": {"n": n}, "tenant": "silent"} for n in range(start, start + 50)]})
    time.sleep(3)  # the silent endpoints' sends are on their way
    open(log, "w").close()
    during = bench.steady(topic, 2.5, seconds, token=token, prefix="calm", log=log, tenant="quiet")
    held = bench.count("SELECT count(*) FROM herald_delivery_delivery d JOIN herald_subscriptions_tenant t "
                       "ON t.id = d.tenant_id WHERE t.external_id = 'silent' AND d.status = 'in_flight'")
    bench.stop_engine()
    row("quiet tenant publish→receipt p99, alone", alone["receipt_p99_ms"], "ms", p50_ms=alone["receipt_p50_ms"])
    row("quiet tenant publish→receipt p99, beside 20 silent endpoints", during["receipt_p99_ms"], "ms",
        2 * alone["receipt_p99_ms"] + 50, "2× alone + 50 ms", p50_ms=during["receipt_p50_ms"],
        silent_in_flight=held)
    print(f"{'':<52}p50 alone {alone['receipt_p50_ms']} ms, beside {during['receipt_p50_ms']} ms; "
          f"{held} of the silent tenant's deliveries in flight at the end")
    return rows


def silent_tenants(bench: Bench, quick: bool) -> list[dict]:
    """Failure in shares (#54): eight tenants' 20 endpoints each accept connections and never answer (6,400
    deliveries, 30 s timeouts: past both workers' bound on stalled sends), beside a neighbour tenant whose endpoint
    answers in 3 s (`maxAttempts: 1`, its 30 s timeout) and a quiet tenant publishing every 0.4 s to a server of
    its own. Every one of the neighbour's deliveries must succeed on its one attempt (none ended by Herald); the
    quiet tenant's p99 beside twice its time alone plus 50 ms."""
    rows: list[dict] = []
    row = reporter(rows)
    seconds, tenants, per_tenant = 30 * (0.5 if quick else 1.0), 8, 40
    port, log = bench.own_receiver()
    bench.reset({"fast": 1})
    base = f"http://127.0.0.1:{bench.receiver_port}"
    made = bench.django(f"""
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from subscriptions.models import Endpoint, Subscription, Tenant, Topic
user, _ = get_user_model().objects.get_or_create(username="saas8")
topic = Topic.objects.create(owner=user, name="saas8", open_to_tenants=True)
def subscribe(tenant, url, policy):
    Subscription.objects.create(topic=topic, tenant=tenant, status="confirmed", delivery_policy=policy,
                                endpoint=Endpoint.objects.create(owner=user, tenant=tenant, url=url))
for t in range({tenants}):
    silent = Tenant.objects.create(owner=user, external_id=f"silent{{t}}", name=f"Silent {{t}}")
    for n in range(20):
        subscribe(silent, f"{base}/hang/{{t}}/{{n}}", {{"requestPolicy": {{"timeoutSeconds": 30}}}})
subscribe(Tenant.objects.create(owner=user, external_id="neighbour", name="Neighbour"), "{base}/three/0",
          {{"requestPolicy": {{"timeoutSeconds": 30}}, "retryLimits": {{"maxAttempts": 1}}}})
subscribe(Tenant.objects.create(owner=user, external_id="quiet", name="Quiet"), "http://127.0.0.1:{port}/calm/0",
          {FAST_POLICY!r})
print(topic.id, Token.objects.get_or_create(user=user)[0].key)""").strip().splitlines()[-1].split()
    topic, token = int(made[0]), made[1]
    session, alone = quiet_tenant_alone(bench, topic, token, log, seconds)
    for t in range(tenants):
        session.post(f"{bench.api}/topics/{topic}/publish-batch/", timeout=60, json={
            "entries": [{"id": f"{t}-{n}", "payload": {"n": n}, "tenant": f"silent{t}"} for n in range(per_tenant)]})
    time.sleep(5)  # the silent endpoints' sends are on their way and stalling
    for n in range(8):
        session.post(f"{bench.api}/topics/{topic}/publish/", json={"payload": n, "tenant": "neighbour"}, timeout=30)
    open(log, "w").close()
    during = bench.steady(topic, 2.5, seconds, token=token, prefix="calm", log=log, tenant="quiet")
    by_tenant = "JOIN herald_subscriptions_tenant t ON t.id = d.tenant_id WHERE t.external_id"
    deadline = time.time() + 60
    while bench.count(f"SELECT count(*) FROM herald_delivery_delivery d {by_tenant} = 'neighbour' "
                      "AND d.status IN ('pending', 'in_flight')") and time.time() < deadline:
        time.sleep(0.5)
    succeeded = bench.count(f"SELECT count(*) FROM herald_delivery_delivery d {by_tenant} = 'neighbour' "
                            "AND d.status = 'succeeded' AND d.attempt_count = 1")
    ended = bench.db.execute(
        "SELECT t.external_id LIKE 'silent%', count(*) FROM herald_delivery_attempt a JOIN herald_delivery_delivery d "
        "ON d.id = a.delivery_id JOIN herald_subscriptions_tenant t ON t.id = d.tenant_id "
        "WHERE a.error_class = 'cut_short' GROUP BY 1").fetchall()
    stalled = bench.count(f"SELECT count(*) FROM herald_delivery_delivery d {by_tenant} LIKE 'silent%' "
                          "AND d.status = 'in_flight'")
    bench.stop_engine()
    ended_by = {("silent tenants" if silent else "others"): n for silent, n in ended}
    row("neighbour (3 s answers) deliveries succeeded beside 8 tenants' silent endpoints", succeeded, "of 8", 8,
        "all of them", cut_short=ended_by)
    row("quiet tenant publish→receipt p99, alone (8 silent tenants)", alone["receipt_p99_ms"], "ms",
        p50_ms=alone["receipt_p50_ms"])
    row("quiet tenant publish→receipt p99, beside 8 tenants × 20 silent endpoints", during["receipt_p99_ms"], "ms",
        2 * alone["receipt_p99_ms"] + 50, "2× alone + 50 ms", p50_ms=during["receipt_p50_ms"],
        silent_in_flight=stalled)
    print(f"{'':<52}p50 alone {alone['receipt_p50_ms']} ms, beside {during['receipt_p50_ms']} ms; {stalled} silent "
          f"deliveries in flight; sends ended by Herald: {ended_by or 'none'}")
    return rows


def measured_publish(bench: Bench, row, topic: int, count: int, name: str, ceiling=None, ceiling_name: str = "",
                     *, threads: int = THREADS) -> None:
    """`count` REST publishes from `threads` threads, reported with their p50/p99 and the CPU per 1,000."""
    before = bench.cpu()
    rate, latencies = bench.publish_many(topic, count, threads=threads)
    cpu = spent(before, bench.cpu())
    row(name, rate, "msgs/s", ceiling, ceiling_name, p50_ms=round(pct(latencies, 0.5), 1),
        p99_ms=round(pct(latencies, 0.99), 1), **per_thousand(cpu, count))
    print(f"{'':<52}p50 {pct(latencies, 0.5):.1f} ms, p99 {pct(latencies, 0.99):.1f} ms")
    print(cpu_line(cpu, count, "publishes"))


def measured_drain(bench: Bench, row, count: int, name: str, ceiling=None, ceiling_name: str = "",
                   *, workers: int = 2) -> None:
    """`bench.drain(count, workers)`, reported with the CPU per 1,000 deliveries."""
    seconds, cpu = bench.drain(count, workers)
    row(name, count / seconds, "deliveries/s", ceiling, ceiling_name, **per_thousand(cpu, count))
    print(cpu_line(cpu, count, "deliveries"))


def scenarios(bench: Bench, quick: bool) -> list[dict]:
    scale = 0.3 if quick else 1.0
    rows: list[dict] = []
    fast_url = f"http://127.0.0.1:{bench.receiver_port}/fast/0"
    row = reporter(rows)

    # Publishing, workers stopped.
    root = bench.api_root_rate()
    topic = bench.reset({"fast": 1})
    measured_publish(bench, row, topic, int(2000 * scale), "publish via REST, 8 threads", root, "API root reads/s")
    rate, _ = bench.publish_many(topic, int(20000 * scale), batch=100)
    row("publish-batch via REST (100/request), 8 threads", rate, "msgs/s", root, "API root reads/s")

    # A backlog, drained.
    loop = requests_loop_rate(fast_url)
    messages = int(10000 * scale)
    measured_drain(bench, row, messages, f"drain {messages} deliveries, 2 workers", loop, "requests.Session loop")

    # The same drain beside a million pending deliveries that are not yet due.
    backlog = int(1_000_000 * scale)
    topic = bench.reset({"fast": 1})
    plan = bench.add_backlog(topic, backlog)
    bench.publish_many(topic, messages, batch=100)
    bench.start_engine()
    seconds = bench.wait_delivered(messages)
    bench.stop_engine()
    drained = rows[-1]["value"]
    row(f"drain {messages} beside {backlog:,} pending not due", messages / seconds, "deliveries/s", drained,
        "the same drain, empty table", due_query_plan=plan)
    print("\n".join(f"{'':<52}{line}" for line in plan.splitlines()[:6]))

    rows += steady_rates(bench, quick)
    rows += slow_endpoints(bench, quick)
    rows += one_slow_endpoint(bench, quick)

    # One endpoint hanging until its timeout among 19 fast ones, beside the same 19 alone.
    # Two rounds each, alternating, the better of each kept: a drain of seconds is at the mercy of this machine.
    messages = int(1000 * scale)
    rates = {"with": 0.0, "without": 0.0}
    for label, subs in (("without", {"fast": 19}), ("with", {"fast": 19, "hang": 1})) * 2:
        topic = bench.reset(subs)
        bench.publish_many(topic, messages)
        bench.start_engine()
        seconds = bench.wait_delivered(messages * 19, prefix="fast")
        bench.stop_engine()
        rates[label] = max(rates[label], messages * 19 / seconds)
    row("19 fast endpoints beside one hanging (5 s timeout)", rates["with"], "deliveries/s", rates["without"],
        "the 19 alone")

    # Fan-out to 10,000 subscriptions.
    subscriptions = int(10000 * scale)
    messages = 3
    topic = bench.reset({"fast": subscriptions})
    rate, latencies = bench.publish_many(topic, messages)
    bench.start_engine()
    seconds = bench.wait_delivered(messages * subscriptions)
    bench.stop_engine()
    row(f"fan-out {messages} msgs × {subscriptions} subscriptions", messages * subscriptions / seconds,
        "deliveries/s", loop, "requests.Session loop", publish_p50_ms=round(pct(latencies, 0.5), 1))
    print(f"{'':<52}publish answered in p50 {pct(latencies, 0.5):.0f} ms (fan-out written by a job)")
    rows += noisy_neighbour(bench, quick)
    rows += slow_neighbours(bench, quick)
    rows += silent_tenant(bench, quick)
    rows += silent_tenants(bench, quick)
    rows += tracing_cost(bench, quick)
    rows += scale_out(bench, quick)
    row("worker peak RSS", bench.peak_rss_kb / 1024, "MB")
    return rows


def chart(rows: list[dict], path: str) -> None:
    """A horizontal bar chart (SVG, no dependencies): each figure as a share of its ceiling."""
    bars = [r for r in rows if r["ceiling"]]
    width, left, height = 900, 380, 28 * len(bars) + 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             'font-size="12">', '<text x="10" y="20" font-weight="bold">Herald, as a share of the ceiling measured '
             'in the same run (1.0 = the ceiling)</text>']
    scale = (width - left - 80) / max(1.2, max(r["value"] / r["ceiling"] for r in bars))
    for n, r in enumerate(bars):
        y = 40 + n * 28
        share = r["value"] / r["ceiling"]
        parts.append(f'<text x="10" y="{y + 14}">{r["scenario"]}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{share * scale:.0f}" height="18" fill="#3b7dd8"/>')
        parts.append(f'<text x="{left + share * scale + 6:.0f}" y="{y + 14}">{share:.2f}×</text>')
    parts.append(f'<line x1="{left + scale:.0f}" y1="35" x2="{left + scale:.0f}" y2="{height - 10}" '
                 'stroke="#c33" stroke-dasharray="4"/></svg>')
    Path(path).write_text("\n".join(parts) + "\n")


ROUNDS = 3


def tracing_cost(bench: Bench, quick: bool) -> list[dict]:
    """Without the OpenTelemetry packages, with them and tracing off, and tracing on (OTLP over HTTP to a sink on
    this machine that answers at once, every span sampled), in ROUNDS alternating rounds, the median of each
    reported (its rounds beside): REST publish (workers stopped) and a drain by 2 workers, each with the CPU it
    cost per 1,000."""
    scale = 0.3 if quick else 1.0
    rows: list[dict] = []
    row = reporter(rows)
    sink_port, _ = bench.own_receiver()  # answers 200 to anything: an OTLP/HTTP collector's stand-in
    # "absent": the processes cannot import opentelemetry, as without the extra; what "off" adds to it is what
    # tracing costs when it is not asked for.
    absent = os.path.join(bench.workdir, "no-otel")
    os.makedirs(os.path.join(absent, "opentelemetry"), exist_ok=True)
    Path(absent, "opentelemetry", "__init__.py").write_text('raise ImportError("not installed (benchmark)")\n')
    modes = {"absent": {"PYTHONPATH": os.pathsep.join(filter(None, [absent, os.environ.get("PYTHONPATH")]))},
             "off": {}, "on": {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "herald-bench",
                               "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}"}}
    publishes, drained = int(3000 * scale), int(10000 * scale)
    rounds: dict[str, dict[str, list]] = {mode: {"publish": [], "drain": []} for mode in modes}
    for mode in list(modes) * ROUNDS:
        bench.restart_web(**modes[mode])
        topic = bench.reset({"fast": 1})
        bench.publish_many(topic, 50)  # gunicorn's workers warm
        before = bench.cpu()
        rate, latencies = bench.publish_many(topic, publishes)
        rounds[mode]["publish"].append((rate, pct(latencies, 0.5), pct(latencies, 0.99), spent(before, bench.cpu())))
        seconds, cpu = bench.drain(drained)
        rounds[mode]["drain"].append((drained / seconds, cpu))
    exported = int(requests.get(f"http://127.0.0.1:{sink_port}/count", timeout=10).text)
    bench.restart_web()

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    def typical(kind: str, mode: str) -> tuple[float, dict[str, float]]:
        """The median rate of a mode's rounds, and the median CPU of each process kind."""
        found = rounds[mode][kind]
        cpu = {name: median([entry[-1][name] for entry in found]) for name in found[0][-1]}
        return median([entry[0] for entry in found]), cpu

    beside = {"absent": None, "off": "absent", "on": "off"}  # each mode against the one before it
    names = {"absent": "the extra not installed", "off": "tracing off", "on": "tracing on"}
    for mode in modes:
        rate, cpu = typical("publish", mode)
        ceiling = typical("publish", beside[mode])[0] if beside[mode] else None
        row(f"{names[mode]}: publish via REST, 8 threads", rate, "msgs/s", ceiling,
            names[beside[mode]] if ceiling else "", rounds=[round(entry[0], 1) for entry in rounds[mode]["publish"]],
            p50_ms=round(median([entry[1] for entry in rounds[mode]["publish"]]), 1),
            p99_ms=round(median([entry[2] for entry in rounds[mode]["publish"]]), 1), **per_thousand(cpu, publishes))
        print(cpu_line(cpu, publishes, "publishes"))
    for mode in modes:
        rate, cpu = typical("drain", mode)
        ceiling = typical("drain", beside[mode])[0] if beside[mode] else None
        row(f"{names[mode]}: drain {drained} deliveries, 2 workers", rate, "deliveries/s", ceiling,
            names[beside[mode]] if ceiling else "", rounds=[round(entry[0], 1) for entry in rounds[mode]["drain"]],
            **per_thousand(cpu, drained))
        print(cpu_line(cpu, drained, "deliveries"))
    print(f"{'':<52}{exported} OTLP export requests received by the sink")
    if not exported:
        raise RuntimeError("tracing on exported nothing: the figures would not be tracing's")
    return rows


def publish_and_drain(bench: Bench, quick: bool) -> list[dict]:
    """The two CPU figures #39 halves, alone (`--only cpu`): REST publish with the workers stopped, beside reads of
    the API root by as many threads on the same gunicorn (the web's CPU of an authenticated request), and the drain
    of one fast endpoint by 2 workers, each with the CPU per 1,000 of every process kind."""
    rows: list[dict] = []
    row = reporter(rows)
    scale = 0.3 if quick else 1.0
    topic = bench.reset({"fast": 1})
    bench.publish_many(topic, 50)  # gunicorn's workers warm
    before, seconds = bench.cpu(), 5 * scale + 2
    reads = bench.api_root_rate(seconds)
    cpu = spent(before, bench.cpu())
    row("API root reads, 8 threads (token auth, one query)", reads, "reads/s", **per_thousand(cpu, reads * seconds))
    print(cpu_line(cpu, reads * seconds, "reads"))
    measured_publish(bench, row, topic, int(2000 * scale), "publish via REST, 8 threads")
    read_cpu, publish_cpu = rows[-2]["cpu_s_per_1000_web"], rows[-1]["cpu_s_per_1000_web"]
    print(f"{'':<52}web CPU per publish / per authenticated read: {publish_cpu / read_cpu:.2f}")
    loop = requests_loop_rate(f"http://127.0.0.1:{bench.receiver_port}/fast/0")
    messages = int(10000 * scale)
    measured_drain(bench, row, messages, f"drain {messages} deliveries, 2 workers", loop, "requests.Session loop")
    return rows


def web_floor(bench: Bench, quick: bool) -> list[dict]:
    """The web's CPU per request at 100 requests/s (`--only web-floor`, workers stopped): gunicorn alone, serving
    an application that answers `{}`; then four requests on Herald's gunicorn: /healthz, answered before Django's
    middleware; DRF's API root and one topic, an authenticated read each (token authentication and one query); and
    the REST publish. What the publish costs beyond an authenticated read is the publish's own work."""
    rows: list[dict] = []
    row = reporter(rows)
    topic = bench.reset({"fast": 1})
    seconds = 6 if quick else 20
    cpu, count = bare_gunicorn(bench, seconds)
    row("gunicorn alone (bench/bare_wsgi.py) at 100/s: web CPU per request", cpu["web"] * 1000 / count, "ms",
        **per_thousand(cpu, count))
    print(cpu_line(cpu, count, "requests"))
    web = f"http://127.0.0.1:{bench.web_port}"
    for name, method, url in (("GET /healthz", "get", f"{web}/healthz"), ("GET /api/", "get", f"{bench.api}/"),
                              ("GET /api/topics/{id}/", "get", f"{bench.api}/topics/{topic}/"),
                              ("POST /api/topics/{id}/publish/", "post", f"{bench.api}/topics/{topic}/publish/")):
        cpu, count = bench.at_rate(method, url, 100, seconds)
        row(f"{name} at 100/s: web CPU per request", cpu["web"] * 1000 / count, "ms", **per_thousand(cpu, count))
        print(cpu_line(cpu, count, "requests"))
    return rows


def bare_gunicorn(bench: Bench, seconds: float) -> tuple[dict[str, float], int]:
    """`Bench.at_rate` against gunicorn itself: the same 2 sync workers serving an application that answers `{}`
    (bench/bare_wsgi.py), counted as the web while it runs."""
    port = localredis.free_port()
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "bare_wsgi:application", "--chdir",
                                str(ROOT / "bench"), "--bind", f"127.0.0.1:{port}", "--workers", "2"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    web, bench.web = bench.web, process
    try:
        bench.wait_for_web(f"http://127.0.0.1:{port}/")
        return bench.at_rate("get", f"http://127.0.0.1:{port}/", 100, seconds)
    finally:
        bench.web = web
        process.terminate()
        process.wait(30)


def steady_rates(bench: Bench, quick: bool) -> list[dict]:
    """Publishing at 10, 100, 200 and 300 msgs/s (open loop) with everything running, one fast endpoint
    (`--only steady`): what a shop's ordinary day looks like. Each with the CPU of every process kind per 1,000
    messages (each is one publish and one delivery): at these rates a worker claims and records a few deliveries at
    a time, not a drain's 64."""
    rows: list[dict] = []
    row = reporter(rows)
    scale = 0.3 if quick else 1.0
    for target in (10, 100, 200, 300):  # (10: a small shop's day, where every message is a round of its own)
        topic = bench.reset({"fast": 1})
        bench.start_engine()
        time.sleep(2)
        before = bench.cpu()
        figures = bench.steady(topic, target, 20 * scale + 5)
        cpu = {kind: seconds - before[kind] for kind, seconds in bench.cpu().items()}
        bench.stop_engine()
        published = int(target * (20 * scale + 5))
        row(f"steady {target} msgs/s: achieved", figures["achieved"], "msgs/s", target, "target", **figures,
            **per_thousand(cpu, published))
        print(f"{'':<52}publish p50/p99 {figures['publish_p50_ms']}/{figures['publish_p99_ms']} ms; "
              f"publish→receipt p50/p99 {figures['receipt_p50_ms']}/{figures['receipt_p99_ms']} ms")
        print(cpu_line(cpu, published, "messages (a publish and a delivery each)"))
    return rows


def slow_endpoints(bench: Bench, quick: bool) -> list[dict]:
    """A receiver answering after 200 ms: ten endpoints, and twenty (#39's shape: their rooms, 640 per worker, are
    more than a worker's 512 slots), drained by 2 workers, beside an asyncio client keeping 256 requests in flight
    to the same receiver (`--only slow-endpoints`)."""
    rows: list[dict] = []
    row = reporter(rows)
    scale = 0.3 if quick else 1.0
    ceiling = asyncio_rate(f"http://127.0.0.1:{bench.receiver_port}/slow/ceiling", int(3000 * scale))
    for endpoints, messages in ((10, int(1000 * scale)), (20, int(200 * scale))):
        topic = bench.reset({"slow": endpoints})
        bench.publish_many(topic, messages)
        bench.start_engine()
        cpu = {}
        seconds = bench.wait_delivered(messages * endpoints, cpu=cpu)
        bench.stop_engine()
        in_flight = bench.in_flight()
        row(f"200 ms receiver, {endpoints} endpoints", messages * endpoints / seconds, "deliveries/s", ceiling,
            "asyncio client, 256 in flight", **per_thousand(cpu, messages * endpoints), **in_flight)
        print(cpu_line(cpu, messages * endpoints, "deliveries"))
        print(f"{'':<52}requests in flight: {in_flight.get('in_flight_avg')} on average, "
              f"{in_flight.get('in_flight_peak')} at most")
    return rows


def one_slow_endpoint(bench: Bench, quick: bool) -> list[dict]:
    """One endpoint answering in 200 ms, drained by 2 workers: each may keep HERALD_MAX_IN_FLIGHT_PER_ENDPOINT
    requests in flight to it, so the most it can take is that room over the latency. The ceiling is measured in the
    same run: an asyncio client keeping the same number of requests in flight to the same receiver."""
    rows: list[dict] = []
    row = reporter(rows)
    workers = 2
    room = workers * int(os.environ.get("HERALD_MAX_IN_FLIGHT_PER_ENDPOINT", DEFAULTS["MAX_IN_FLIGHT_PER_ENDPOINT"]))
    messages = int(3000 * (0.5 if quick else 1.0))
    ceiling = asyncio_rate(f"http://127.0.0.1:{bench.receiver_port}/slow/ceiling", messages, in_flight=room)
    seconds, cpu = bench.drain(messages, workers, {"slow": 1})
    row("200 ms receiver, 1 endpoint, 2 workers", messages / seconds, "deliveries/s", ceiling,
        f"asyncio client, {room} in flight", **per_thousand(cpu, messages))
    print(cpu_line(cpu, messages, "deliveries"))
    return rows


def scale_out(bench: Bench, quick: bool) -> list[dict]:
    """Scale-out, shown: REST publish with 1, 2 and 4 gunicorn workers (16 client threads), and the drain of one
    fast endpoint with 1, 2 and 4 RQ workers, each with its CPU per 1,000 (PostgreSQL's too). Each figure is beside
    the one with one process, so the ratio is what adding processes bought on this machine's cores."""
    rows: list[dict] = []
    row = reporter(rows)
    scale = 0.3 if quick else 1.0
    publishes, messages = int(2000 * scale), int(10000 * scale)
    for webs in (1, 2, 4):
        bench.restart_web(webs)
        topic = bench.reset({"fast": 1})
        bench.publish_many(topic, 20 * webs)
        one = (rows[0]["value"], "1 web worker") if rows else (None, "")
        measured_publish(bench, row, topic, publishes, f"publish via REST, {webs} web worker{'s' * (webs > 1)}, "
                         f"16 threads", *one, threads=16)
    bench.restart_web()
    first = len(rows)
    for workers in (1, 2, 4):
        one = (rows[first]["value"], "1 worker") if len(rows) > first else (None, "")
        measured_drain(bench, row, messages, f"drain {messages} deliveries, {workers} worker{'s' * (workers > 1)}",
                       *one, workers=workers)
    return rows


ONLY = {"cpu": publish_and_drain, "scale-out": scale_out, "tracing": tracing_cost, "steady": steady_rates,
        "one-endpoint": one_slow_endpoint, "slow-endpoints": slow_endpoints, "noisy-neighbour": noisy_neighbour,
        "slow-neighbours": slow_neighbours, "silent-tenant": silent_tenant, "silent-tenants": silent_tenants,
        "web-floor": web_floor}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="about a third of the work of each scenario")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--chart", help="write an SVG chart here")
    parser.add_argument("--only", choices=sorted(ONLY), help="run only this scenario")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="herald-bench-")
    os.chmod(workdir, 0o755)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Linux {os.uname().release}", flush=True)
    bench = Bench(workdir)
    try:
        rows = ONLY[args.only](bench, args.quick) if args.only else scenarios(bench, args.quick)
    finally:
        bench.close()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    if args.chart:
        chart(rows, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())

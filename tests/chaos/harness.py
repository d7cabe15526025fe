"""The chaos run: at-least-once under the faults operators live with.

    make chaos                                              # 10,000 messages
    python -m tests.chaos.harness --messages 1000 --rate 50 # the smaller run `make test` includes

It starts its own PostgreSQL and Redis (it restarts both), the receivers, gunicorn as the Procfile runs it, two
workers and the scheduler, and publishes through the REST API while it kill -9s a worker every ~15 s (a process
manager starts a new one), stops Redis and then PostgreSQL for 6 s while workers and the scheduler are restarted
and started into the outage, flushes Redis, restarts Redis, restarts PostgreSQL and kill -9s the scheduler; the
receivers answer 5xx, time out, reset, refuse, send poisoned headers and garbage (tests/chaos/receivers.py).
Then it waits for everything to settle and checks: 0 lost (every accepted message received by every subscription
of its topic, or dead-lettered with a reason), 0 stuck, duplicates only after a try whose outcome Herald could not
know (a kill -9 mid-send, a timeout) and under 10 %, no process that exited by itself, attempts in the API match the
requests the receivers saw, and each ordering key reached its ordered subscription in publish order. It prints a
summary and exits 1 if a check fails.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import psycopg
import requests
from redis import Redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from delivery.management import localredis  # noqa: E402
from tests.chaos.receivers import MANNERS, REFUSING  # noqa: E402
from tests.pgbouncer import PgBouncer  # noqa: E402
from tests.stack import Postgres  # noqa: E402

TOPICS = 4
KEYS = 16  # every message carries ordering_key k<n % KEYS>; each topic has one subscription with ordered delivery
CHAOS_POLICY = {"retrySchedule": {"delays": [0.5, 1, 2, 4], "repeatLast": True}, "retryLimits": {"maxAttempts": 8},
                "requestPolicy": {"timeoutSeconds": 1}}
# Attempts that may never have reached the receiver: refused, lost with a killed worker, never built, or timed out
# (on a loaded machine a request can time out before its first byte leaves the worker's event loop).
NEVER_REACHED = ("connection", "lease_expired", "internal", "dns", "blocked_address", "timeout")
OUTAGE_SECONDS = 6.0  # longer than a process takes to start on a loaded machine, so it starts into the outage
# A 2xx sent again is allowed by at-least-once only after a try whose outcome Herald could not know: its worker died
# (or lost its database) mid-send and the lease expired (`lease_expired`), or the answer did not reach Herald within
# the policy's timeout though the receiver wrote it (`timeout`: the poison receiver's 600 KB of headers on a loaded
# machine). Any other duplicate is a defect and fails the run.
UNKNOWN_OUTCOMES = ("lease_expired", "timeout")
# Of the succeeded deliveries: a bound on the allowed kind that still catches a regression such as a backlog resent
# whole. Measured: 0.3-1 % on a quiet machine, up to 4.8 % with a second chaos stack on the same 2 cores
# (docs/reliability.md); the duplicates of any other kind must be 0.
ALLOWED_DUPLICATE_LIMIT = 0.10


class Stack:
    """The processes of one run, started and restarted as an operator's process manager would."""

    def __init__(self, workdir: str, *, pgbouncer: bool = False):
        self.workdir = workdir
        self.postgres = Postgres(workdir, durable_commits=True).start()  # it crashes the server: see docs
        # With `pgbouncer`, every Herald process reaches PostgreSQL only through PgBouncer in transaction mode (its
        # restarts and crash are PostgreSQL's; PgBouncer stays up, as it does in production).
        self.bouncer = PgBouncer("127.0.0.1", self.postgres.port, self.postgres.user, "herald").start() \
            if pgbouncer else None
        self.redis_port = localredis.free_port()
        self.redis_dir = os.path.join(workdir, "redis")
        self.redis = localredis.start(self.redis_port, self.redis_dir)
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.web_port, self.receiver_port, self.flaky_port = (localredis.free_port() for _ in range(3))
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings",
                    "DATABASE_URL": self.bouncer.url if self.bouncer else self.postgres.url,
                    "DATABASE_POOLER": "pgbouncer" if self.bouncer else "",
                    "REDIS_URL": self.redis_url, "SECRET_KEY": "chaos-run", "DEBUG": "0", "PYTHONUNBUFFERED": "1",
                    "HERALD_REQUIRE_CONFIRMATION": "false", "HERALD_ALLOWED_NETWORKS": "127.0.0.0/8",
                    "HERALD_PUBLISH_RATE": "1000000/min", "HERALD_RECONCILE_AFTER_SECONDS": "5",
                    "HERALD_LEASE_MARGIN_SECONDS": "3", "HERALD_RECONCILE_INTERVAL_SECONDS": "1",
                    "HERALD_PROBE_INTERVAL_SECONDS": "3", "HERALD_DISABLE_MIN_ATTEMPTS": "50",
                    "LOG_LEVEL": "WARNING"}
        self.workers: list[subprocess.Popen] = []
        self.others: list[subprocess.Popen] = []
        self.killed: set[int] = set()
        self.asked: list[subprocess.Popen] = []  # sent SIGTERM: each must exit by itself
        self.scheduler: subprocess.Popen | None = None

    def run(self, *args, log: str | None = None, check=False) -> subprocess.Popen | subprocess.CompletedProcess:
        if check:
            return subprocess.run([sys.executable, *args], cwd=ROOT, env=self.env, check=True,
                                  capture_output=True, text=True)
        out = open(os.path.join(self.workdir, log), "ab") if log else subprocess.DEVNULL
        return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=self.env, stdout=out,
                                stderr=subprocess.STDOUT)

    def prepare(self) -> str:
        self.run("manage.py", "migrate", "--noinput", check=True)
        made = self.run("manage.py", "shell", "-c",
                        "from django.contrib.auth.models import User; from rest_framework.authtoken.models import "
                        "Token; print(Token.objects.create(user=User.objects.create_user('chaos')).key)",
                        check=True)
        self.others.append(self.run("-m", "tests.chaos.receivers", self.receiver_log, str(self.receiver_port),
                                    str(self.flaky_port), log="receivers.log"))
        self.others.append(self.run("-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{self.web_port}",
                                    "--workers", "2", log="web.log"))
        localredis.wait_for_port(self.web_port, 30)
        localredis.wait_for_port(self.receiver_port, 30)
        return made.stdout.strip().splitlines()[-1]

    @property
    def receiver_log(self) -> str:
        return os.path.join(self.workdir, "received.jsonl")

    def start_engine(self, workers: int) -> None:
        for _ in range(workers):
            self.start_worker()
        self.start_scheduler()

    def start_worker(self) -> None:
        self.workers.append(self.run("manage.py", "rqworker", "deliveries", "retries", log="workers.log"))

    def start_scheduler(self) -> None:
        self.scheduler = self.run("manage.py", "herald_cron", log="scheduler.log")

    # --- faults -------------------------------------------------------------------------------------------------
    def running_workers(self) -> list[subprocess.Popen]:
        return [w for w in self.workers if w.poll() is None and w not in self.asked]

    def kill_worker(self, rng: random.Random) -> str:
        alive = self.running_workers()
        victim = rng.choice(alive)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.killed.add(victim.pid)
        self.start_worker()
        return f"kill -9 worker {victim.pid}"

    def kill_scheduler(self, rng) -> str:
        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait()
        self.killed.add(self.scheduler.pid)
        self.start_scheduler()
        return "kill -9 scheduler"

    def flush_redis(self, rng) -> str:
        Redis.from_url(self.redis_url).flushall()
        return "Redis FLUSHALL"

    def restart_redis(self, rng) -> str:
        self.redis.send_signal(signal.SIGKILL)
        self.redis.wait()
        time.sleep(2)
        self.redis = localredis.start(self.redis_port, self.redis_dir)
        return "Redis restarted (2 s down, empty)"

    def restart_postgres(self, rng) -> str:
        self.postgres.restart("fast")
        return "PostgreSQL restarted"

    def crash_postgres(self, rng) -> str:
        self.postgres.restart("immediate")  # no clean shutdown: crash recovery on start, as after a failover
        return "PostgreSQL crashed and restarted"

    def restart_engine_while_redis_is_down(self, rng) -> str:
        """Redis goes away; a worker is stopped as a deploy would (SIGTERM) and another is killed, and both are
        replaced, and the scheduler restarted, while it is down: the new processes start without Redis."""
        self.redis.send_signal(signal.SIGKILL)
        self.redis.wait()
        stopped, killed = self.replace_workers(rng)
        self.scheduler.send_signal(signal.SIGTERM)
        self.asked.append(self.scheduler)
        self.start_scheduler()
        time.sleep(OUTAGE_SECONDS)
        self.redis = localredis.start(self.redis_port, self.redis_dir)
        return (f"Redis down {OUTAGE_SECONDS:g} s (empty after): worker {stopped} stopped, worker {killed} "
                "killed -9, scheduler stopped, and all three started again while it was down")

    def restart_engine_while_postgres_is_down(self, rng) -> str:
        """The same while PostgreSQL is down (stopped for maintenance, then started)."""
        self.postgres.shut_down("fast")
        stopped, killed = self.replace_workers(rng)
        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait()
        self.killed.add(self.scheduler.pid)
        self.start_scheduler()
        time.sleep(OUTAGE_SECONDS)
        self.postgres.start_again()
        return (f"PostgreSQL down {OUTAGE_SECONDS:g} s: worker {stopped} stopped, worker {killed} killed -9, "
                "scheduler killed -9, and all three started again while it was down")

    def replace_workers(self, rng) -> tuple[int, int]:
        """One worker asked to stop (SIGTERM), another killed -9; both replaced at once."""
        polite, rude = rng.sample(self.running_workers(), 2)
        polite.send_signal(signal.SIGTERM)
        self.asked.append(polite)
        rude.send_signal(signal.SIGKILL)
        rude.wait()
        self.killed.add(rude.pid)
        self.start_worker()
        self.start_worker()
        return polite.pid, rude.pid

    def not_stopped_when_asked(self) -> list[str]:
        return [f"{' '.join(p.args[1:3])} pid {p.pid}" for p in self.asked if p.poll() is None]

    def exited_by_themselves(self) -> list[str]:
        engine = [*self.workers, self.scheduler]
        asked = {p.pid for p in self.asked}
        return [f"{' '.join(p.args[1:3])} pid {p.pid} rc={p.returncode}" for p in [*engine, *self.others]
                if p.poll() is not None and p.pid not in self.killed and p.pid not in asked]

    def stop(self) -> None:
        for process in [*self.workers, self.scheduler, *self.others]:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in [*self.workers, self.scheduler, *self.others]:
            if process is not None:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.redis.terminate()
        self.redis.wait(10)
        if self.bouncer is not None:
            self.bouncer.stop()
        self.postgres.stop()


class Publisher:
    """Publishes message n to topic n % TOPICS through the REST API at a fixed rate, retrying each one with its
    Idempotency-Key until it is accepted (202), as a careful client does through outages."""

    def __init__(self, base: str, token: str, topics: list[int], messages: int, rate: float, threads: int = 4):
        self.base, self.topics, self.messages, self.rate, self.threads = base, topics, messages, rate, threads
        self.headers = {"Authorization": f"Token {token}"}
        self.accepted: dict[int, tuple[str, int]] = {}
        self.refused = Counter()
        self.latencies: list[float] = []
        self.next = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        self.started = time.monotonic()
        pool = [threading.Thread(target=self.loop) for _ in range(self.threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()

    def loop(self) -> None:
        session = requests.Session()
        while True:
            with self.lock:
                n, self.next = self.next, self.next + 1
            if n >= self.messages:
                return
            time.sleep(max(0.0, self.started + n / self.rate - time.monotonic()))
            self.publish(session, n)

    def publish(self, session: requests.Session, n: int) -> None:
        topic = self.topics[n % TOPICS]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            began = time.monotonic()
            try:
                response = session.post(f"{self.base}/api/topics/{topic}/publish/",
                                        json={"payload": {"n": n}, "ordering_key": f"k{n % KEYS}"},
                                        headers={**self.headers, "Idempotency-Key": f"chaos-{n}"}, timeout=10)
            except requests.RequestException as exc:
                self.refused[type(exc).__name__] += 1
                time.sleep(0.5)
                continue
            if response.status_code == 202:
                self.accepted[n] = (response.json()["message_id"], topic)
                self.latencies.append(time.monotonic() - began)
                return
            self.refused[response.status_code] += 1
            if response.status_code < 500 and response.status_code != 429:
                raise SystemExit(f"message {n} was refused: {response.status_code} {response.text[:200]}")
            time.sleep(0.5)
        raise SystemExit(f"message {n} was never accepted")


def api(base: str, token: str):
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"

    def call(method: str, path: str, **kwargs):
        response = session.request(method, base + path, timeout=30, **kwargs)
        response.raise_for_status()
        return response.json()

    return call


def subscribe_all(call, stack: Stack) -> tuple[list[int], dict[int, str]]:
    """TOPICS topics; every endpoint subscribed to one of them (20 subscriptions). Returns topic ids and
    subscription id -> endpoint name."""
    names = [*MANNERS, *REFUSING]
    topics = [call("post", "/api/topics/", json={"name": f"chaos-{i}"})["id"] for i in range(TOPICS)]
    endpoints = {}
    for index, name in enumerate(names):
        port = stack.flaky_port if name in REFUSING else stack.receiver_port
        created = call("post", "/api/subscriptions/", json={"topic": topics[index % TOPICS],
                                                            "endpoint": f"http://127.0.0.1:{port}/r/{name}",
                                                            "delivery_policy": CHAOS_POLICY,
                                                            "ordered_delivery": name.startswith("ordered-")})
        endpoints[created["id"]] = name
    return topics, endpoints


def fault_plan(duration: float, kill_every: float) -> list[tuple[float, str]]:
    """Worker kills every `kill_every` seconds, and the other faults at set fractions of the publishing time; a
    kill that would fall within 1.5 s of another fault is moved later, half a second at a time, so that each
    fault's effect is its own."""
    others = [(0.15 * duration, "restart_engine_while_redis_is_down"), (0.25 * duration, "flush_redis"),
              (0.35 * duration, "restart_engine_while_postgres_is_down"), (0.45 * duration, "restart_redis"),
              (0.6 * duration, "restart_postgres"), (0.75 * duration, "kill_scheduler"),
              (0.9 * duration, "crash_postgres")]
    kills = []
    for t in frange(min(5.0, kill_every), duration, kill_every):
        while any(at - 1.5 < t < at + 1.5 + (OUTAGE_SECONDS if "while" in fault else 0) for at, fault in others):
            t += 0.5
        kills.append((t, "kill_worker"))
    return sorted(others + kills)


def frange(start: float, stop: float, step: float):
    value = start
    while value < stop:
        yield value
        value += step


def inflict(stack: Stack, plan: list[tuple[float, str]], started: float, done: list[str]) -> None:
    """Each fault at its time, but never within 1.5 s of the end of the one before (a fault can take seconds), so
    that faults that fall behind are spread out rather than bunched."""
    rng = random.Random(11)
    clear_at = 0.0
    for at, fault in plan:
        time.sleep(max(0.0, started + at - time.monotonic(), clear_at - time.monotonic()))
        try:
            done.append(f"{time.monotonic() - started:6.1f}s {getattr(stack, fault)(rng)}")
        except Exception as exc:  # a fault that could not be applied is reported, not fatal
            done.append(f"{time.monotonic() - started:6.1f}s {fault} FAILED: {exc}")
        clear_at = time.monotonic() + 1.5


def settle(database: str, timeout: float, stall: float) -> tuple[float, int]:
    """Wait until nothing is pending or in flight (three looks in a row). Slow is not stuck: give up only when the
    count has not fallen for `stall` seconds, or after `timeout`. Returns (seconds waited, left)."""
    began = last_progress = time.monotonic()
    calm, left, lowest = 0, -1, None
    while time.monotonic() - began < timeout and time.monotonic() - last_progress < stall:
        try:
            with psycopg.connect(database) as conn:
                left = conn.execute("SELECT count(*) FROM herald_delivery_delivery WHERE status IN "
                                    "('pending', 'in_flight', 'waiting')").fetchone()[0]
                left += conn.execute("SELECT count(*) FROM herald_delivery_message WHERE fanout_pending").fetchone()[0]
        except psycopg.OperationalError:
            left = -1
        if left >= 0 and (lowest is None or left < lowest):
            lowest, last_progress = left, time.monotonic()
        calm = calm + 1 if left == 0 else 0
        if calm >= 3:
            break
        time.sleep(1)
    return time.monotonic() - began, left


def received(path: str) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def verify(stack: Stack, call, publisher: Publisher, endpoints: dict[int, str]) -> dict:
    with psycopg.connect(stack.postgres.url) as conn:
        deliveries = {(str(m), s): (status, reason) for m, s, status, reason in conn.execute(
            "SELECT message_id, subscription_id, status, dead_letter_reason FROM herald_delivery_delivery")}
        attempts = conn.execute("SELECT d.subscription_id, a.error_class, a.response_status IS NOT NULL, count(*) "
                                "FROM herald_delivery_attempt a "
                                "JOIN herald_delivery_delivery d ON d.id = a.delivery_id "
                                "GROUP BY 1, 2, 3").fetchall()
        stored_messages = conn.execute("SELECT count(*) FROM herald_delivery_message").fetchone()[0]
        # ordered delivery: publish order per key is the order of the deliveries' ids (same-key publishes are
        # serialized, so id order is commit order; messages published concurrently have no order of their own)
        rank = {}
        for sid, n in conn.execute(
                "SELECT d.subscription_id, (m.payload->>'n')::int FROM herald_delivery_delivery d JOIN "
                "herald_delivery_message m ON m.id = d.message_id WHERE d.ordering_key IS NOT NULL ORDER BY d.id"):
            rank[(endpoints.get(sid), n)] = len(rank)
        tries = defaultdict(list)  # (message id, subscription id) -> error classes of its attempts, in order
        for m, sid, error_class in conn.execute(
                "SELECT d.message_id, d.subscription_id, a.error_class FROM herald_delivery_attempt a "
                "JOIN herald_delivery_delivery d ON d.id = a.delivery_id ORDER BY a.delivery_id, a.number"):
            tries[(str(m), sid)].append(error_class or "-")
        open_rows = conn.execute(
            "SELECT d.status, d.attempt_count, d.next_attempt_at IS NULL, d.next_attempt_at < now(), "
            "e.state, count(*) FROM herald_delivery_delivery d JOIN herald_subscriptions_endpoint e "
            "ON e.id = d.endpoint_id WHERE d.status IN ('pending', 'in_flight', 'waiting') GROUP BY 1, 2, 3, 4, 5 "
            "ORDER BY 6 DESC LIMIT 20").fetchall()
    stuck_rows = [tuple(row) for row in open_rows]
    topic_of = {sid: None for sid in endpoints}
    for sid in endpoints:
        topic_of[sid] = call("get", f"/api/subscriptions/{sid}/")["topic"]
    requests_seen = received(stack.receiver_log)
    ok = Counter((r["path"], r["id"]) for r in requests_seen if r["answered"] == "ok")
    seen_by_path = Counter(r["path"] for r in requests_seen)

    lost, stuck, outcome = [], 0, Counter()
    for _n, (message_id, topic) in publisher.accepted.items():
        for sid, name in endpoints.items():
            if topic_of[sid] != topic:
                continue
            status, reason = deliveries.get((message_id, sid), (None, ""))
            outcome[status or "missing"] += 1
            if status is None:
                lost.append((message_id, name, "no delivery"))
            elif status in ("pending", "in_flight", "waiting"):
                stuck += 1
            elif status == "succeeded" and not ok[(name, message_id)]:
                lost.append((message_id, name, "succeeded, but the receiver never answered it 2xx"))
            elif status in ("dead_lettered", "dropped") and not reason:
                lost.append((message_id, name, f"{status} without a reason"))
    duplicates = sum(count - 1 for count in ok.values() if count > 1)
    # ordered delivery: each key's requests (in the order the receiver answered them) never go back in publish order
    sequences = defaultdict(list)
    for r in requests_seen:
        if r.get("n") is not None:
            sequences[(r["path"], r["n"] % KEYS)].append(r["n"])
    out_of_order = []
    for (path, key), ns in sequences.items():
        ranks = [rank.get((path, n), -1) for n in ns]
        if ranks != sorted(ranks) or -1 in ranks:
            out_of_order.append((path, key, ns))
    sid_of = {name: sid for sid, name in endpoints.items()}
    repeated_after = Counter()  # why a request answered 2xx was sent again: its recorded outcome
    after_kill = after_timeout = unexplained = 0
    unexplained_seen = []  # (endpoint, message id, recorded outcomes of the earlier tries, requests seen)
    for (name, message_id), count in ok.items():
        if count > 1:
            earlier = tries.get((message_id, sid_of.get(name)), [])[:-1]
            for error_class in earlier:
                repeated_after[error_class] += 1
            # each extra 2xx needs an earlier try whose outcome Herald could not know
            lost_tries, timed_out = earlier.count(UNKNOWN_OUTCOMES[0]), earlier.count(UNKNOWN_OUTCOMES[1])
            allowed = min(count - 1, lost_tries + timed_out)
            after_kill += min(allowed, lost_tries)
            after_timeout += allowed - min(allowed, lost_tries)
            unexplained += count - 1 - allowed
            if count - 1 > allowed:
                answers = [(r.get("attempt"), r["answered"], round(r["at"], 2)) for r in requests_seen
                           if r["path"] == name and r["id"] == message_id]
                unexplained_seen.append((name, message_id, earlier, answers))

    per_subscription, mismatched = [], []
    by_sub = defaultdict(Counter)
    by_error = Counter()
    for sid, error_class, answered, count in attempts:
        by_error[error_class or "-"] += count
        by_sub[sid]["total"] += count
        by_sub[sid]["answered"] += count if answered else 0
        by_sub[sid]["maybe_unreached"] += count if error_class in NEVER_REACHED else 0
    for sid, name in sorted(endpoints.items(), key=lambda item: item[1]):
        in_api = call("get", f"/api/subscriptions/{sid}/metrics/", params={"window": "1d"})["attempts"]
        seen, mine = seen_by_path[name], by_sub[sid]
        consistent = (in_api == mine["total"] and mine["answered"] <= seen <= in_api
                      and in_api - seen <= mine["maybe_unreached"])
        per_subscription.append((name, seen, in_api, mine["answered"], mine["maybe_unreached"], consistent))
        if not consistent:
            mismatched.append(name)
    return {"accepted": len(publisher.accepted), "stored_messages": stored_messages,
            "deliveries": sum(outcome.values()), "outcomes": dict(outcome), "lost": lost, "stuck": stuck,
            "duplicates": duplicates, "duplicates_after_kill": after_kill, "duplicates_after_timeout": after_timeout,
            "duplicates_unexplained": unexplained,
            "unexplained_duplicates": unexplained_seen,
            "duplicate_rate": (after_kill + after_timeout) / max(1, outcome["succeeded"]),
            "per_subscription": per_subscription, "attempt_mismatches": mismatched,
            "attempts_by_error": dict(sorted(by_error.items())),
            "duplicates_after": dict(repeated_after.most_common()),
            "requests_seen": len(requests_seen), "stuck_rows": stuck_rows,
            "ordered_keys": len(sequences), "ordered_requests": sum(len(ns) for ns in sequences.values()),
            "out_of_order": out_of_order}


def report(result: dict, faults: list[str], publisher: Publisher, settled: tuple, exited: list[str],
           not_stopped: list[str], elapsed: float) -> bool:
    latencies = sorted(publisher.latencies)
    p = (lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000) if latencies else (
        lambda q: float("nan"))
    checks = [
        ("lost (accepted, neither received nor dead-lettered with a reason)", len(result["lost"]),
         not result["lost"]),
        ("stuck (pending or in flight at the end)", result["stuck"], result["stuck"] == 0),
        (f"duplicates at-least-once allows (after kill -9 / timeout), < {ALLOWED_DUPLICATE_LIMIT:.0%}",
         f"{result['duplicates_after_kill']} + {result['duplicates_after_timeout']} ({result['duplicate_rate']:.2%})",
         result["duplicate_rate"] < ALLOWED_DUPLICATE_LIMIT),
        ("duplicates of any other kind", result["duplicates_unexplained"], result["duplicates_unexplained"] == 0),
        ("attempts in the API match requests seen", "all" if not result["attempt_mismatches"] else
         ", ".join(result["attempt_mismatches"]), not result["attempt_mismatches"]),
        ("processes that exited by themselves", len(exited), not exited),
        ("processes asked to stop that did not", len(not_stopped), not not_stopped),
        (f"ordered keys out of order ({result['ordered_keys']} keys, {result['ordered_requests']} requests)",
         len(result["out_of_order"]), result["ordered_keys"] > 0 and not result["out_of_order"]),
    ]
    print("\nfaults:")
    for line in faults:
        print(f"  {line}")
    print(f"\nmessages accepted {result['accepted']} (stored {result['stored_messages']}), deliveries "
          f"{result['deliveries']}: {result['outcomes']}; requests seen {result['requests_seen']}")
    print(f"publishing refused/retried: {dict(publisher.refused)}; publish p50 {p(0.5):.0f} ms, p99 {p(0.99):.0f} ms")
    print(f"settled {settled[0]:.0f} s after the last publish and fault; whole run {elapsed:.0f} s")
    print(f"\n{'endpoint':<14}{'requests seen':>14}{'attempts (API)':>16}{'with answer':>13}{'maybe unreached':>17}")
    for name, seen, in_api, answered, unreached, consistent in result["per_subscription"]:
        print(f"{name:<14}{seen:>14}{in_api:>16}{answered:>13}{unreached:>17}{'' if consistent else '  MISMATCH'}")
    print(f"attempts by error class: {result['attempts_by_error']}")
    print(f"duplicates, by what was recorded for the earlier try: {result['duplicates_after']}")
    print("\ncheck" + " " * 67 + "result")
    for name, value, passed in checks:
        print(f"  {'ok  ' if passed else 'FAIL'} {name:<66}{value}")
    for line in exited:
        print(f"  exited: {line}")
    for line in not_stopped:
        print(f"  still running though asked to stop: {line}")
    for name, message_id, earlier, answers in result["unexplained_duplicates"][:10]:
        print(f"  duplicate: {message_id} → {name}: earlier tries recorded {earlier}; requests seen (attempt, "
              f"answer, time) {answers}")
    for row in result["stuck_rows"]:
        print("  open: status={} attempts={} held={} due={} endpoint={}: {} rows".format(*row))
    for message_id, name, why in result["lost"][:20]:
        print(f"  lost: {message_id} → {name}: {why}")
    for path, key, ns in result["out_of_order"][:5]:
        print(f"  out of order: {path} k{key}: {ns[:40]}")
    return all(passed for _, _, passed in checks)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=100.0, help="messages per second published")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=15.0, help="seconds between worker kills")
    parser.add_argument("--settle-timeout", type=float, default=1800.0, help="the longest wait for the backlog")
    parser.add_argument("--stall", type=float, default=90.0,
                        help="stuck: nothing settled for this many seconds while deliveries are still open")
    parser.add_argument("--pgbouncer", action="store_true",
                        help="every Herald process through PgBouncer (transaction pooling) in front of PostgreSQL")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) for a look")
    args = parser.parse_args(argv)

    workdir = tempfile.mkdtemp(prefix="herald-chaos-")
    os.chmod(workdir, 0o755)
    began = time.monotonic()
    stack = Stack(workdir, pgbouncer=args.pgbouncer)
    try:
        token = stack.prepare()
        base = f"http://127.0.0.1:{stack.web_port}"
        call = api(base, token)
        topics, endpoints = subscribe_all(call, stack)
        stack.start_engine(args.workers)
        publisher = Publisher(base, token, topics, args.messages, args.rate)
        duration = args.messages / args.rate
        faults: list[str] = []
        plan = fault_plan(duration, args.kill_every)
        print(f"chaos: {args.messages} messages at {args.rate:g}/s to {len(endpoints)} subscriptions on {TOPICS} "
              f"topics; {len(plan)} faults over {duration:.0f} s; "
              f"{'through PgBouncer; ' if args.pgbouncer else ''}work directory {workdir}", flush=True)
        injector = threading.Thread(target=inflict, args=(stack, plan, time.monotonic(), faults))
        injector.start()
        publisher.run()
        injector.join()
        settled = settle(stack.postgres.url, args.settle_timeout, args.stall)
        result = verify(stack, call, publisher, endpoints)
        exited, not_stopped = stack.exited_by_themselves(), stack.not_stopped_when_asked()
        passed = report(result, faults, publisher, settled, exited, not_stopped, time.monotonic() - began)
        if args.json:
            Path(args.json).write_text(json.dumps({**result, "faults": faults, "settle_seconds": settled[0],
                                                   "exited": exited, "not_stopped": not_stopped,
                                                   "messages": args.messages, "rate": args.rate}, indent=1))
        return 0 if passed else 1
    finally:
        stack.stop()
        if args.keep:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

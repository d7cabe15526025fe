"""PostgreSQL failover: a primary with a streaming replica, Herald on a multi-host DATABASE_URL.

    python -m tests.failover --synchronous        # the test's run: nothing acknowledged may be lost
    python -m tests.failover --asynchronous       # measures what asynchronous replication loses (bench/failover.py)

It starts a primary and a replica (pg_basebackup, streaming), a Redis, a receiver, two workers and the scheduler
with `DATABASE_URL=postgres://…@127.0.0.1:<primary>,127.0.0.1:<replica>/herald?target_session_attrs=read-write`,
and a publisher that publishes one message at a time (each with an idempotency key, retried after a database error
as any publisher would) and records each one the database acknowledged. Mid-run it crashes the primary
(`pg_ctl stop -m immediate`) and promotes the replica, as a failover manager would. Nothing is restarted: every
Herald process must find the new primary by itself. Then it waits for every acknowledged message to be received,
or for the deliveries to settle, and reports what was acknowledged, received, lost (acknowledged, never received)
and stuck, how long publishing was refused, and which process exited by itself.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from delivery.management import localredis  # noqa: E402
from tests.stack import Postgres, as_postgres  # noqa: E402

PUBLISHER = """
import sys, time
from django.contrib.auth.models import User
from django.db import InterfaceError, OperationalError, connection
from delivery import events
count, interval, out = {count}, {interval}, open({path!r}, "a", buffering=1)
owner = User.objects.get(username="failover")
for n in range(count):
    while True:
        try:
            events.publish("orders", {{"n": n}}, owner=owner, idempotency_key=f"m{{n}}")
            break
        except (OperationalError, InterfaceError) as exc:  # not acknowledged: publish it again
            out.write(f"refused {{time.time()}}\\n")
            connection.close()
            time.sleep(0.1)
    out.write(f"ack {{n}} {{time.time()}}\\n")
    time.sleep(interval)
"""

SETUP = """
from django.contrib.auth.models import User
from delivery.engine.accounts.subscribing import subscription_create, topic_create
topic, _ = topic_create(owner=User.objects.create_user("failover"), name="orders")
subscription_create(topic=topic, endpoint="{url}",
                    delivery_policy={{"retrySchedule": {{"delays": [0.5, 1], "repeatLast": True}},
                                     "retryLimits": {{"maxAttempts": 1000}}}})
"""


class Receiver:
    """Records the `n` of every message it receives (a set: at-least-once may bring one twice)."""

    def __init__(self):
        self.seen: set[int] = set()
        self.count = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                receiver.seen.add(body["data"]["n"])
                receiver.count += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class LagSampler:
    """How much acknowledged WAL the replica had not yet flushed, sampled every 20 ms until the crash: with
    asynchronous replication, what a failover at that moment loses."""

    def __init__(self, pair: "Pair"):
        self.samples: list[int] = []
        self.running = True
        self.thread = threading.Thread(target=self.loop, args=(pair,), daemon=True)
        self.thread.start()

    def loop(self, pair: "Pair") -> None:
        with psycopg.connect(host="127.0.0.1", port=pair.primary.port, user=pair.primary.user, dbname="herald",
                             autocommit=True) as conn:
            while self.running:
                row = conn.execute("SELECT pg_current_wal_lsn() - flush_lsn FROM pg_stat_replication").fetchone()
                if row and row[0] is not None:
                    self.samples.append(int(row[0]))
                time.sleep(0.02)

    def stop(self) -> None:
        self.running = False
        self.thread.join(5)

    def summary(self) -> dict:
        ordered = sorted(self.samples) or [0]
        return {"samples": len(self.samples), "median": ordered[len(ordered) // 2],
                "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], "max": ordered[-1]}


class Pair:
    """A primary and its streaming replica."""

    def __init__(self, workdir: str, synchronous: bool):
        self.primary = Postgres(os.path.join(workdir, "primary"), durable_commits=True)
        os.makedirs(self.primary.workdir)
        self.primary.start()
        self.replica = Postgres(os.path.join(workdir, "replica"), durable_commits=True)
        os.makedirs(self.replica.data, mode=0o700)
        if os.geteuid() == 0:
            shutil.chown(self.replica.workdir, "postgres")
            shutil.chown(self.replica.data, "postgres")
        subprocess.run(as_postgres([f"{self.replica.bindir}/pg_basebackup", "-h", "127.0.0.1", "-p",
                                    str(self.primary.port), "-U", self.primary.user, "-D", self.replica.data,
                                    "-R", "-X", "stream", "--no-sync", "--checkpoint=fast"]), check=True)
        self.replica.start_again()
        if synchronous:
            self.sql(self.primary, "ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()")
        wanted = "sync" if synchronous else "async"
        deadline = time.monotonic() + 30
        while self.sql(self.primary, "SELECT sync_state FROM pg_stat_replication") != [(wanted,)]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica is not streaming ({wanted}) after 30 s")
            time.sleep(0.1)

    @property
    def url(self) -> str:
        return (f"postgres://{self.primary.user}@127.0.0.1:{self.primary.port},127.0.0.1:{self.replica.port}"
                f"/herald?target_session_attrs=read-write")

    @staticmethod
    def sql(cluster: Postgres, *statements: str) -> list:
        with psycopg.connect(host="127.0.0.1", port=cluster.port, user=cluster.user, dbname="herald",
                             autocommit=True, connect_timeout=5) as conn:
            rows = []
            for statement in statements:
                cursor = conn.execute(statement)
                rows = cursor.fetchall() if cursor.description else []
            return rows

    def fail_over(self) -> None:
        self.primary.stop()  # pg_ctl stop -m immediate: a crash, the machine is gone
        self.replica.pg_ctl("promote", "-w")

    def stop(self) -> None:
        self.primary.stop()
        self.replica.stop()


def tail(workdir: str) -> str:
    """The end of each process's log, for a run that failed."""
    logs = []
    for name in ("publisher.log", "workers.log", "scheduler.log"):
        path = os.path.join(workdir, name)
        if os.path.exists(path):
            with open(path, errors="replace") as log:
                logs.append(f"--- {name}\n" + log.read()[-2000:])
    return "\n".join(logs)


def run(synchronous: bool, messages: int, rate: float, fail_after: int, timeout: float) -> dict:
    workdir = tempfile.mkdtemp(prefix="herald-failover-")
    os.chmod(workdir, 0o755)
    processes: list[subprocess.Popen] = []
    redis = pair = None
    try:
        pair = Pair(workdir, synchronous)
        redis_port = localredis.free_port()
        redis = localredis.start(redis_port, os.path.join(workdir, "redis"))
        receiver = Receiver()
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "DATABASE_URL": pair.url,
               "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "SECRET_KEY": "failover", "DEBUG": "0",
               "PYTHONUNBUFFERED": "1", "HERALD_REQUIRE_CONFIRMATION": "false",
               "HERALD_ALLOWED_NETWORKS": "127.0.0.0/8", "HERALD_RECONCILE_AFTER_SECONDS": "3",
               "HERALD_LEASE_MARGIN_SECONDS": "2", "HERALD_RECONCILE_INTERVAL_SECONDS": "0.5",
               "LOG_LEVEL": "WARNING"}

        def manage(*args, log=None):
            out = open(os.path.join(workdir, log), "ab") if log else subprocess.DEVNULL
            process = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdout=out,
                                       stderr=subprocess.STDOUT)
            processes.append(process)
            return process

        for args in (("migrate", "--noinput"), ("shell", "-c", SETUP.format(url=receiver.url))):
            done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                                  text=True)
            if done.returncode:
                raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-3000:]}")
        for _ in range(2):
            manage("rqworker", "deliveries", "retries", log="workers.log")
        manage("herald_cron", log="scheduler.log")
        published = os.path.join(workdir, "published.log")
        publisher = manage("shell", "-c", PUBLISHER.format(count=messages, interval=1 / rate, path=published),
                           log="publisher.log")

        def acknowledged() -> list[tuple[int, float]]:
            if not os.path.exists(published):
                return []
            with open(published) as lines:
                return [(int(p[1]), float(p[2])) for p in (line.split() for line in lines)
                        if p[0] == "ack" and len(p) == 3]

        lag = LagSampler(pair)
        deadline = time.monotonic() + timeout
        while len(acknowledged()) < fail_after or len(receiver.seen) < fail_after // 2:
            if time.monotonic() > deadline or publisher.poll() is not None:
                raise RuntimeError("the run did not get going before the failover: " + tail(workdir))
            time.sleep(0.05)
        lag.stop()
        failed_at = time.time()
        pair.fail_over()
        promoted_at = time.time()
        publisher.wait(max(1.0, deadline - time.monotonic()))
        acked = acknowledged()
        wanted = {n for n, _ in acked}
        while not wanted <= receiver.seen and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # anything still arriving late
        lost = sorted(wanted - receiver.seen)
        kept = {int(key[1:]) for (key,) in pair.sql(pair.replica, "SELECT idempotency_key FROM "
                                                                   "herald_delivery_message")}
        unfinished = pair.sql(pair.replica, "SELECT count(*) FROM herald_delivery_delivery "
                                            "WHERE status IN ('pending', 'in_flight', 'waiting')")[0][0]
        with open(published) as lines:
            refusals = [float(line.split()[1]) for line in lines if line.startswith("refused")]
        first_ack_after = min((at for _, at in acked if at > failed_at), default=None)
        exited = [p.args[2] for p in processes if p is not publisher and p.poll() is not None]
        return {
            "replication": "synchronous" if synchronous else "asynchronous",
            "acknowledged": len(wanted), "received": len(wanted & receiver.seen), "requests": receiver.count,
            "lost": lost, "lost_acknowledged_before_crash_ms": [round((failed_at - at) * 1000, 1)
                                                                for n, at in acked if n in set(lost)],
            "acknowledged_but_not_on_the_new_primary": sorted(wanted - kept),
            "replica_flush_lag_bytes": lag.summary(), "unfinished": unfinished, "publish_refusals": len(refusals),
            "promote_seconds": round(promoted_at - failed_at, 2),
            "publishing_stopped_seconds": round(first_ack_after - failed_at, 2) if first_ack_after else None,
            "exited_by_themselves": exited,
        }
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        if redis is not None:
            redis.terminate()
            redis.wait(10)
        if pair is not None:
            pair.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--synchronous", action="store_true")
    mode.add_argument("--asynchronous", action="store_true")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--rate", type=float, default=40.0, help="messages per second published")
    parser.add_argument("--fail-after", type=int, default=100, help="acknowledged messages before the crash")
    parser.add_argument("--timeout", type=float, default=240.0)
    args = parser.parse_args(argv)
    result = run(args.synchronous, args.messages, args.rate, args.fail_after, args.timeout)
    print(json.dumps(result, indent=2))
    failed = result["lost"] or result["unfinished"] or result["exited_by_themselves"]
    return 1 if failed or (args.synchronous and result["acknowledged_but_not_on_the_new_primary"]) else 0


if __name__ == "__main__":
    sys.exit(main())

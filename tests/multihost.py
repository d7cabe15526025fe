"""Herald on several hosts: network namespaces stand in for machines, veth pairs and bridges for the network.

    sudo python -m tests.multihost          # needs root (ip netns); prints its figures as JSON, exits 1 on a failure

Hosts (each a namespace with its own addresses; they share the machine's clock, and faketime skews a process's):
- `db`:  PostgreSQL on the data network (10.88.1.1) and Redis on the edge network (10.88.2.2);
- `rx`:  the receiver on the edge network, 10.88.2.1: it answers after 0.6 s, and 503 to the first try of every
         fourth message (retried after the policy's 2 s);
- `h1`:  a worker; its data link is cut mid-send (a partition: packets dropped, no reset, no error) for 12 s, longer
         than its leases. It still reaches the receiver and Redis, so it is answered and journals the answers but
         cannot record them;
- `h2`:  a worker whose clock runs 3 s ahead, the scheduler whose clock runs 3 s behind, and the publisher;
- `h3`:  a worker, killed with SIGKILL mid-send.

Checks: every message received and every delivery finished (0 lost, 0 stuck); no retry early by the receiver's
clock (the real one) whatever the skewed clocks said; no process exited by itself; what h1 was answered 2xx while
cut off was recorded from the journal when its leases expired, not sent again.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from delivery.management import localredis  # noqa: E402
from tests.stack import Postgres  # noqa: E402

DB, REDIS, RX = "10.88.1.1", "10.88.2.2", "10.88.2.1"
HOSTS = {"h1": 11, "h2": 12, "h3": 13}
RETRY_DELAY = 2.0
ANSWER_DELAY = 0.6
EARLY_TOLERANCE = 0.05  # the receiver's own timestamps: a retry may not arrive before its due time minus this
MESSAGES = 600
RATE = 25.0  # published per second

RECEIVER = """
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
log, lock = open(sys.argv[1], "a", buffering=1), threading.Lock()
RX, ANSWER_DELAY = sys.argv[2], float(sys.argv[3])
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        arrived = time.time()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        attempt = int(self.headers.get("herald-attempt") or 0)
        n = body["data"]["n"]
        status = 503 if n % 4 == 0 and attempt == 1 else 200
        with lock:
            log.write(json.dumps({"n": n, "attempt": attempt, "status": None, "arrived": arrived,
                                  "from": self.client_address[0]}) + chr(10))
        time.sleep(ANSWER_DELAY)
        answered = time.time()
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        with lock:
            log.write(json.dumps({"n": n, "attempt": attempt, "status": status, "arrived": arrived,
                                  "answered": answered, "from": self.client_address[0]}) + chr(10))
    def log_message(self, *args):
        pass
ThreadingHTTPServer((RX, 8080), Handler).serve_forever()
"""

PUBLISHER = """
import time
from django.contrib.auth.models import User
from django.db import InterfaceError, OperationalError, connection
from delivery import events
owner = User.objects.get(username="hosts")
for n in range({count}):
    while True:
        try:
            events.publish("orders", {{"n": n}}, owner=owner, idempotency_key=f"m{{n}}")
            break
        except (OperationalError, InterfaceError):
            connection.close()
            time.sleep(0.2)
    time.sleep({interval})
print("published", {count}, flush=True)
"""

SETUP = """
from django.contrib.auth.models import User
from delivery.engine.accounts.subscribing import subscription_create, topic_create
topic, _ = topic_create(owner=User.objects.create_user("hosts"), name="orders")
subscription_create(topic=topic, endpoint="http://{rx}:8080/hook",
                    delivery_policy={{"retrySchedule": {{"delays": [{delay}], "repeatLast": True}},
                                     "retryLimits": {{"maxAttempts": 50}}, "requestPolicy": {{"timeoutSeconds": 5}}}})
"""


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


class Network:
    """Namespaces `<tag>db`, `<tag>rx`, `<tag>h1`… joined by two bridges in `<tag>sw`: data (10.88.1.0/24: the
    database and Redis) and edge (10.88.2.0/24: the receiver). Every host is on both."""

    def __init__(self):
        self.tag = f"hm{os.getpid() % 10000}"
        self.switch = self.ns("sw")
        self.made: list[str] = []

    def ns(self, name: str) -> str:
        return f"{self.tag}{name}"

    def up(self) -> None:
        for name in ("sw", "db", "rx", *HOSTS):
            sh("ip", "netns", "add", self.ns(name))
            self.made.append(self.ns(name))
            sh("ip", "-n", self.ns(name), "link", "set", "lo", "up")
        for bridge in ("data", "edge"):
            sh("ip", "-n", self.switch, "link", "add", bridge, "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", bridge, "up")
        self.attach("db", "data", DB)
        self.attach("db", "edge", REDIS)
        self.attach("rx", "edge", RX)
        for host, last in HOSTS.items():
            self.attach(host, "data", f"10.88.1.{last}")
            self.attach(host, "edge", f"10.88.2.{last}")

    def attach(self, name: str, bridge: str, address: str) -> None:
        inside, outside = f"{bridge}0", f"{name}-{bridge}"
        sh("ip", "link", "add", "tmp-" + self.tag, "type", "veth", "peer", "name", "tmq-" + self.tag)
        sh("ip", "link", "set", "tmp-" + self.tag, "netns", self.ns(name), "name", inside)
        sh("ip", "link", "set", "tmq-" + self.tag, "netns", self.switch, "name", outside)
        sh("ip", "-n", self.switch, "link", "set", outside, "master", bridge)
        sh("ip", "-n", self.switch, "link", "set", outside, "up")
        sh("ip", "-n", self.ns(name), "addr", "add", f"{address}/24", "dev", inside)
        sh("ip", "-n", self.ns(name), "link", "set", inside, "up")

    def cut(self, host: str, bridge: str = "data") -> None:
        """Packets to and from `host` on `bridge` are dropped at the switch: no reset, no error, silence."""
        sh("ip", "-n", self.switch, "link", "set", f"{host}-{bridge}", "down")

    def heal(self, host: str, bridge: str = "data") -> None:
        sh("ip", "-n", self.switch, "link", "set", f"{host}-{bridge}", "up")

    def run(self, name: str, args: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.ns(name), *args], **kwargs)

    def down(self) -> None:
        for namespace in self.made:
            for pid in sh("ip", "netns", "pids", namespace, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        time.sleep(0.2)
        for namespace in self.made:
            sh("ip", "netns", "del", namespace, check=False)


def available() -> str | None:
    """Why this cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (ip netns)"
    if not shutil.which("ip"):
        return "needs iproute2 (ip)"
    if not shutil.which("faketime"):
        return "needs faketime (apt-get install faketime)"
    return None


def run(workdir: str) -> dict:
    net = Network()
    processes: dict[str, subprocess.Popen] = {}
    try:
        net.up()
        Postgres(workdir, durable_commits=True, host=DB, port=5432, namespace=net.ns("db"),
                 trusted_network="10.88.1.0/24").start()
        # Bound to the namespace's address without a password: Redis 7's protected mode would refuse every client
        # from another host (the namespaces are this test's private network).
        processes["redis"] = net.run("db", [localredis.redis_server_binary(), "--bind", REDIS, "--port", "6379",
                                            "--protected-mode", "no",
                                            "--save", "", "--appendonly", "no", "--loglevel", "warning"],
                                     stdout=subprocess.DEVNULL)
        received = os.path.join(workdir, "received.jsonl")
        processes["receiver"] = net.run("rx", [sys.executable, "-c", RECEIVER, received, RX,
                                               str(ANSWER_DELAY)])
        # Tight TCP timeouts so the partition turns into an outage within seconds (the defaults take ~25 s).
        database = (f"postgres://postgres@{DB}:5432/herald?keepalives_idle=2&keepalives_interval=1"
                    f"&keepalives_count=2&tcp_user_timeout=4000&connect_timeout=3")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "DATABASE_URL": database,
               "REDIS_URL": f"redis://{REDIS}:6379/0?socket_timeout=5", "SECRET_KEY": "hosts", "DEBUG": "0",
               "PYTHONUNBUFFERED": "1", "HERALD_REQUIRE_CONFIRMATION": "false",
               "HERALD_ALLOWED_NETWORKS": "10.88.2.0/24", "HERALD_RECONCILE_AFTER_SECONDS": "3",
               "HERALD_LEASE_MARGIN_SECONDS": "2", "HERALD_RECONCILE_INTERVAL_SECONDS": "0.5",
               "LOG_LEVEL": "INFO"}

        def manage(host: str, name: str, *args: str, skew: str = "", log: str | None = None, check=False):
            host_env = env
            command = [sys.executable, "manage.py", *args]
            if skew:
                command = ["faketime", "-f", skew, *command]
            out = open(os.path.join(workdir, log or f"{name}.log"), "ab")
            if check:
                done = subprocess.run(["ip", "netns", "exec", net.ns(host), *command], cwd=ROOT, env=host_env,
                                      capture_output=True, text=True)
                if done.returncode:
                    raise RuntimeError(f"{' '.join(args[:1])} on {host} failed: {done.stderr[-3000:]}")
                return done
            processes[name] = net.run(host, command, cwd=ROOT, env=host_env, stdout=out, stderr=subprocess.STDOUT)
            return processes[name]

        manage("h2", "migrate", "migrate", "--noinput", check=True)
        manage("h2", "setup", "shell", "-c", SETUP.format(rx=RX, delay=RETRY_DELAY), check=True)
        manage("h1", "worker-h1", "rqworker", "deliveries", "retries")
        manage("h2", "worker-h2", "rqworker", "deliveries", "retries", skew="+3s")
        manage("h3", "worker-h3", "rqworker", "deliveries", "retries")
        manage("h2", "scheduler", "herald_cron", skew="-3s")
        time.sleep(3)
        manage("h2", "publisher", "shell", "-c", PUBLISHER.format(count=MESSAGES, interval=1 / RATE))

        def lines(answered: bool = True) -> list[dict]:
            """The receiver's answers (or, with answered=False, the arrivals it has not answered yet)."""
            with open(received) as handle:
                return [row for row in map(json.loads, filter(str.strip, handle))
                        if (row["status"] is not None) == answered]

        def wait_for(predicate, timeout: float, what: str):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if predicate():
                    return
                time.sleep(0.05)
            raise RuntimeError(f"timed out waiting for {what}: {tail(workdir)}")

        def in_flight_from(address: str) -> int:
            """Requests from `address` that arrived and are not yet answered (the receiver holds each 0.6 s)."""
            now = time.time()
            return sum(1 for r in lines(answered=False) if r["from"] == address and now - r["arrived"] < 0.3)

        wait_for(lambda: os.path.exists(received) and len(lines()) >= 60, 90, "the first deliveries")
        # h3: killed mid-send.
        wait_for(lambda: in_flight_from("10.88.2.13") > 0, 30, "a send from h3")
        processes["worker-h3"].send_signal(signal.SIGKILL)
        processes["worker-h3"].wait(10)
        killed_at = time.time()
        # h1: cut from the database and Redis mid-send; it still reaches the receiver.
        wait_for(lambda: in_flight_from("10.88.2.11") > 0, 30, "a send from h1")
        net.cut("h1")
        cut_at = time.time()
        time.sleep(12)
        net.heal("h1")
        healed_at = time.time()
        processes["publisher"].wait(120)

        def settled() -> bool:
            rows = lines()
            return {r["n"] for r in rows if r["status"] == 200} == set(range(MESSAGES))

        wait_for(settled, 120, "every message to be received")
        time.sleep(3)  # late writes (the journal, a lease that expires) land
        unfinished = manage("h2", "check", "shell", "-c",
                            "from delivery.models import Delivery; print(Delivery.objects.filter(status__in="
                            "['pending', 'in_flight', 'waiting']).count(), Delivery.objects.count())",
                            check=True).stdout.strip().splitlines()[-1].split()
        rows = lines()
        early, lateness = [], []
        by_message: dict[int, list[dict]] = {}
        for row in rows:
            by_message.setdefault(row["n"], []).append(row)
        for n, tries in by_message.items():
            tries.sort(key=lambda r: r["arrived"])
            for before, after in zip(tries, tries[1:], strict=False):
                if before["status"] == 503:  # a scheduled retry: due RETRY_DELAY after the answer
                    gap = after["arrived"] - (before["answered"] + RETRY_DELAY)
                    lateness.append(gap)
                    if gap < -EARLY_TOLERANCE:
                        early.append({"n": n, "early_by_s": round(-gap, 3)})
        answered_to_h1 = {r["n"] for r in rows if r["from"] == "10.88.2.11" and r["status"] == 200
                          and cut_at <= r["answered"] <= healed_at}
        exited = [name for name, p in processes.items()
                  if name not in ("publisher", "worker-h3") and p.poll() is not None]
        lateness.sort()
        return {
            "messages": MESSAGES, "received": len({r["n"] for r in rows if r["status"] == 200}),
            "requests": len(rows), "unfinished": int(unfinished[0]), "deliveries": int(unfinished[1]),
            "retries_checked": len(lateness), "early": early,
            "retry_lateness_s": {"min": round(lateness[0], 3), "median": round(lateness[len(lateness) // 2], 3),
                                 "max": round(lateness[-1], 3)} if lateness else None,
            "answered_2xx_to_h1_while_cut": len(answered_to_h1),
            "of_which_sent_again": sorted(n for n in answered_to_h1 if sum(r["status"] == 200
                                                                         for r in by_message[n]) > 1),
            "h3_killed_at": killed_at, "cut_seconds": round(healed_at - cut_at, 1),
            "exited_by_themselves": exited,
            # Each such process's own last words, so a failure in CI says why without its work directory.
            "exit_logs": {name: {"returncode": processes[name].returncode, "log": last_lines(workdir, name)}
                          for name in exited},
        }
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.terminate()
        for process in processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        net.down()


def last_lines(workdir: str, name: str, count: int = 30) -> list[str]:
    path = os.path.join(workdir, f"{name}.log")
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as log:
        return log.read().splitlines()[-count:]


def tail(workdir: str) -> str:
    parts = []
    for name in ("worker-h1.log", "worker-h2.log", "scheduler.log", "publisher.log"):
        path = os.path.join(workdir, name)
        if os.path.exists(path):
            with open(path, errors="replace") as log:
                parts.append(f"--- {name}\n{log.read()[-1500:]}")
    return "\n".join(parts)


def main() -> int:
    why = available()
    if why:
        print(f"multihost: {why}", file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix="herald-hosts-")
    os.chmod(workdir, 0o755)
    try:
        result = run(workdir)
    finally:
        if not os.environ.get("KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result, indent=2))
    failed = result["unfinished"] or result["early"] or result["exited_by_themselves"] or \
        result["received"] != result["messages"] or result["of_which_sent_again"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""A day in the life, compressed: an hour of steady publishing with fan-out, failing endpoints and retention purging
all along, sampled every minute (docs/benchmarks.md, "A day in the life, compressed").

    python bench/soak.py [--minutes 60] [--rate 60] [--fanout 5] [--failing 1] [--retention-minutes 5]
                         [--json docs/soak.json] [--chart docs/soak.svg]

Herald runs as the Procfile runs it (gunicorn with 2 workers, 2 RQ workers, `herald_cron`) on PostgreSQL with
durable commits and Redis, the harness of bench/scenarios.py. Each message goes to `--fanout` subscriptions:
the failing ones point at a closed port (connection refused at once), the others at the fast receiver. Their policy
retries after 1 s, at most 3 tries, and gives a delivery 120 s at most, so a failing endpoint's deliveries end as
dead letters and its health moves through disabled and frozen as it would in production.

Retention runs in a purger process of its own every minute: `retention.purge()` with a clock 30 days (the default
retention) less `--retention-minutes` ahead, so it purges what is older than that many minutes, exactly the
statements `herald_cron`'s hourly tick runs. Its cost is its own CPU, and at most that plus every second its
statements ran (their PostgreSQL CPU is inside PostgreSQL's figure and cannot be told apart).

Every minute: CPU per message by process kind, publish and publish → receipt p50/p99 (receipts of the fast
endpoints), each table's size with its indexes, live and dead tuples, the deliveries by state, Redis's memory and
the purge's rows and cost. At the end: the figures as JSON, a chart of the curves, and for each curve its last
third against its middle third (flat: within 15 %, or for sizes within one retention period's growth).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scenarios import Bench, pct, process_tree_cpu  # noqa: E402

POLICY = {"requestPolicy": {"timeoutSeconds": 5}, "retrySchedule": {"delays": [1]},
          "retryLimits": {"maxAttempts": 3, "maxAgeSeconds": 120}}
TABLES = ("herald_delivery_message", "herald_delivery_delivery", "herald_delivery_attempt")
# The purger: retention's own statements every minute, with a clock that makes "older than the retention" mean
# "older than --retention-minutes"; one JSON line per pass on stdout.
PURGER = """
import json, sys, time
from datetime import timedelta
from django.utils import timezone
from delivery.conf import herald
from delivery.engine.scheduler import retention
ahead = timedelta(days=min(herald.ATTEMPT_RETENTION_DAYS, herald.MESSAGE_RETENTION_DAYS)) - timedelta(minutes={minutes})
while True:
    cpu, wall = time.process_time(), time.perf_counter()
    purged = retention.purge(now=timezone.now() + ahead)
    print(json.dumps({{"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                      "purged": purged}}), flush=True)
    time.sleep(max(0.0, 60 - (time.perf_counter() - wall)))
"""


class Publisher:
    """Publishes at `rate` msgs/s (open loop, 32 client threads) for as long as it runs; keeps each message's
    publish time and each publish's latency, taken by the sampler minute by minute."""

    def __init__(self, bench: Bench, topic: int, rate: float):
        self.bench, self.topic, self.rate = bench, topic, rate
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.sent_at: dict[str, float] = {}
        self.failed = 0
        self.stop = threading.Event()
        self.sessions = threading.local()

    def one(self, n: int, began: float) -> None:
        """Publish number `n`, due at `began` (its latency counts from then: a client thread's lateness too)."""
        session = getattr(self.sessions, "s", None) or self.bench.session()
        self.sessions.s = session
        try:
            response = session.post(f"{self.bench.api}/topics/{self.topic}/publish/", json={"payload": {"n": n}},
                                    timeout=30)
            message = response.json()["message_id"]
        except Exception:
            with self.lock:
                self.failed += 1
            return
        with self.lock:
            self.latencies.append((time.time() - began) * 1000)
            self.sent_at[message] = began

    def run(self) -> None:
        started = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            n = 0
            while not self.stop.is_set():
                due = started + n / self.rate
                time.sleep(max(0.0, due - time.perf_counter()))
                pool.submit(self.one, n, time.time() - (time.perf_counter() - due))
                n += 1

    def take_latencies(self) -> list[float]:
        with self.lock:
            taken, self.latencies = self.latencies, []
        return taken


class Receipts:
    """Publish → receipt of each request the fast receiver logged since the last look."""

    def __init__(self, path: str):
        self.path, self.offset = path, 0

    def take(self, sent_at: dict[str, float]) -> list[float]:
        with open(self.path) as log:
            log.seek(self.offset)
            lines = log.readlines()
            if lines and not lines[-1].endswith("\n"):
                lines.pop()  # half written: read next time
            self.offset += sum(len(line) for line in lines)
        found = []
        for line in lines:
            arrived, webhook, _ = line.split()
            if webhook in sent_at:
                found.append((float(arrived) - sent_at[webhook]) * 1000)
        return found


def add_failing(bench: Bench, topic: int, count: int) -> None:
    bench.django(f"""
from subscriptions.models import Endpoint, Subscription, Topic
topic = Topic.objects.get(id={topic})
for n in range({count}):
    endpoint = Endpoint.objects.create(owner=topic.owner, url=f"http://127.0.0.1:9/fail/{{n}}")
    Subscription.objects.create(topic=topic, endpoint=endpoint, status="confirmed", delivery_policy={POLICY!r})
""")


def table_figures(bench: Bench) -> dict:
    figures = {}
    for table, size, indexes, live, dead in bench.db_execute(
            """SELECT relname, pg_table_size(relid), pg_indexes_size(relid), n_live_tup, n_dead_tup
               FROM pg_stat_user_tables WHERE relname = ANY(%s)""", [list(TABLES)]).fetchall():
        short = table.rsplit("_", 1)[1]
        figures.update({f"{short}_mb": round(size / 2**20, 1), f"{short}_index_mb": round(indexes / 2**20, 1),
                        f"{short}_live": live, f"{short}_dead": dead})
    for status, count in bench.db_execute(
            "SELECT status, count(*) FROM herald_delivery_delivery GROUP BY status").fetchall():
        figures[f"deliveries_{status}"] = count
    return figures


def flatness(samples: list[dict], key: str) -> tuple[float, float] | None:
    """(mean of the middle third, mean of the last third) of a curve, or None if it has too few points."""
    values = [s[key] for s in samples if isinstance(s.get(key), int | float)]
    third = len(values) // 3
    if third < 2:
        return None
    middle, last = values[third:2 * third], values[2 * third:]
    return sum(middle) / len(middle), sum(last) / len(last)


CURVES = [("CPU per message, ms", ["web_ms", "worker_ms", "postgres_ms", "redis_ms", "scheduler_ms", "purge_ms"]),
          ("latency p99, ms", ["publish_p99_ms", "receipt_p99_ms"]),
          ("table + indexes, MB", ["message_total_mb", "delivery_total_mb", "attempt_total_mb"]),
          ("dead tuples", ["message_dead", "delivery_dead", "attempt_dead"]),
          ("Redis used memory, MB", ["redis_mb"]),
          ("RQ jobs waiting", ["jobs_waiting"]),
          ("deliveries by state", ["deliveries_pending", "deliveries_in_flight", "deliveries_succeeded",
                                   "deliveries_dead_lettered"])]
COLOURS = ["#3b7dd8", "#d8733b", "#3bb273", "#c33", "#8a5cd8", "#777"]


def chart(samples: list[dict], path: str, title: str) -> None:
    """Small multiples (SVG, no dependencies): each group of curves against the minute."""
    width, panel, gap = 900, 170, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{len(CURVES) * (panel + gap) + 40}" '
             'font-family="sans-serif" font-size="11">', f'<text x="10" y="20" font-weight="bold">{title}</text>']
    minutes = [s["minute"] for s in samples] or [0]
    for n, (name, keys) in enumerate(CURVES):
        top, left, right = 40 + n * (panel + gap), 60, width - 200
        values = [s.get(k) for s in samples for k in keys if isinstance(s.get(k), int | float)]
        high = max(values + [1e-9]) * 1.1
        parts.append(f'<text x="{left}" y="{top - 6}" font-weight="bold">{name}</text>')
        parts.append(f'<rect x="{left}" y="{top}" width="{right - left}" height="{panel}" fill="none" stroke="#ccc"/>')
        parts.append(f'<text x="4" y="{top + 10}">{high:.4g}</text><text x="4" y="{top + panel}">0</text>')
        for k, key in enumerate(keys):
            points = [(s["minute"], s[key]) for s in samples if isinstance(s.get(key), int | float)]
            if not points:
                continue
            span = max(max(minutes) - min(minutes), 1)
            xy = " ".join(f"{left + (m - min(minutes)) / span * (right - left):.1f},"
                          f"{top + panel - v / high * panel:.1f}" for m, v in points)
            colour = COLOURS[k % len(COLOURS)]
            parts.append(f'<polyline points="{xy}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
            parts.append(f'<text x="{right + 10}" y="{top + 14 + 14 * k}" fill="{colour}">{key}</text>')
    parts.append("</svg>")
    Path(path).write_text("\n".join(parts) + "\n")


class Soak:
    """The run: Herald, the purger and the publisher started, then one sample a minute."""

    def __init__(self, bench: Bench, args):
        self.bench, self.args = bench, args
        topic = bench.reset({"fast": args.fanout - args.failing}, POLICY)
        add_failing(bench, topic, args.failing)
        bench.start_engine()
        self.purger = subprocess.Popen([sys.executable, "manage.py", "shell", "--no-imports", "-c",
                                        PURGER.format(minutes=args.retention_minutes)],
                                       cwd=ROOT, env=bench.env, stdout=subprocess.PIPE, text=True)
        self.purges: list[dict] = []
        threading.Thread(target=lambda: [self.purges.append(json.loads(line)) for line in self.purger.stdout],
                         daemon=True).start()
        self.redis = redis.Redis(port=bench.redis_port)
        time.sleep(3)
        self.publisher = Publisher(bench, topic, args.rate)
        threading.Thread(target=self.publisher.run, daemon=True).start()
        self.receipts = Receipts(bench.received_log)
        self.cpu, self.purge_cpu, self.published = bench.cpu(), process_tree_cpu([self.purger.pid]), 0

    def sample(self, minute: int) -> dict:
        now, purge_now = self.bench.cpu(), process_tree_cpu([self.purger.pid])
        with self.publisher.lock:
            published, sent_at = len(self.publisher.sent_at), dict(self.publisher.sent_at)
        messages = max(published - self.published, 1)
        latencies, arrived = self.publisher.take_latencies(), self.receipts.take(sent_at)
        purges, self.purges[:] = list(self.purges), []
        purge_ms = (purge_now - self.purge_cpu) * 1000  # (its statements' PostgreSQL CPU is in postgres_ms)
        sample = {"minute": minute, "messages": published - self.published,
                  **{f"{kind}_ms": round((now[kind] - self.cpu[kind]) * 1000 / messages, 3)
                     for kind in ("web", "worker", "scheduler", "postgres", "redis")},
                  "purge_ms": round(purge_ms / messages, 3),
                  "purge_wall_s": round(sum(p["wall_s"] for p in purges), 2),
                  "purged_rows": sum(sum(p["purged"].values()) for p in purges),
                  "publish_p50_ms": round(pct(latencies, 0.5), 1), "publish_p99_ms": round(pct(latencies, 0.99), 1),
                  "receipt_p50_ms": round(pct(arrived, 0.5), 1), "receipt_p99_ms": round(pct(arrived, 0.99), 1),
                  "publish_failures": self.publisher.failed,
                  "redis_mb": round(self.redis.info("memory")["used_memory"] / 2**20, 2),
                  "jobs_waiting": self.redis.llen("rq:queue:deliveries") + self.redis.llen("rq:queue:retries"),
                  **table_figures(self.bench)}
        for short in ("message", "delivery", "attempt"):
            sample[f"{short}_total_mb"] = round(sample.get(f"{short}_mb", 0) + sample.get(f"{short}_index_mb", 0), 1)
        ingest = sum(sample[f"{kind}_ms"] for kind in ("web", "worker", "postgres", "redis"))
        # The purge's share of the ingest's CPU: at least the purger's own; at most that plus every second its
        # statements ran, as if all of it were PostgreSQL's CPU (its real part is inside postgres_ms).
        upper = sample["purge_ms"] + sample["purge_wall_s"] * 1000 / messages
        sample["purge_share"] = round(sample["purge_ms"] / ingest, 3) if ingest else None
        sample["purge_share_at_most"] = round(upper / ingest, 3) if ingest else None
        self.cpu, self.purge_cpu, self.published = now, purge_now, published
        return sample

    def stop(self) -> None:
        self.publisher.stop.set()
        self.purger.terminate()


LINE = ("{minute:3d} {messages:5d} {web_ms:5.2f} {worker_ms:5.2f} {postgres_ms:5.2f} {redis_ms:5.2f} {purge_ms:5.2f}  "
        "{publish_p99_ms:7.1f} {receipt_p99_ms:8.1f}  {delivery_total_mb:8.1f} {attempt_total_mb:10.1f} "
        "{delivery_dead:7d} {deliveries_pending:7d} {redis_mb:8.2f}")
HEADER = (f"{'min':>3} {'msgs':>5} {'web':>5} {'work':>5} {'pg':>5} {'redis':>5} {'purge':>5}  {'pub p99':>7} "
          f"{'rcpt p99':>8}  {'deliv MB':>8} {'attempt MB':>10} {'dead':>7} {'pending':>7} {'redis MB':>8}")


def report(samples: list[dict]) -> None:
    print("\nlast third against the middle third (after the first retention period):")
    for _, keys in CURVES:
        for key in keys:
            pair = flatness(samples, key)
            if pair:
                middle, last = pair
                change = (last - middle) / middle if middle else 0.0
                print(f"  {key:28s} {middle:10.2f} -> {last:10.2f}  ({change:+.0%})")
    for key, what in (("purge_share", "the purger's own CPU"), ("purge_share_at_most", "with its statements' time")):
        shares = [s[key] for s in samples if s.get(key) is not None]
        if shares:
            print(f"the purge's cost against the ingest's CPU ({what}): {sum(shares) / len(shares):.3f} on average, "
                  f"{max(shares):.3f} at most")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--rate", type=float, default=60,
                        help="messages per second (100, each to 5 subscriptions, is more than this 2-core machine "
                             "sustains beside the benchmark's own client and receiver)")
    parser.add_argument("--fanout", type=int, default=5)
    parser.add_argument("--failing", type=int, default=1)
    parser.add_argument("--retention-minutes", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--chart")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="herald-soak-")
    os.chmod(work, 0o755)  # (PostgreSQL runs as its own user below it)
    bench = Bench(work)
    soak, samples = None, []
    try:
        soak = Soak(bench, args)
        print(HEADER, flush=True)
        started = time.monotonic()
        for minute in range(1, args.minutes + 1):
            time.sleep(max(0.0, started + 60 * minute - time.monotonic()))
            samples.append(soak.sample(minute))
            print(LINE.format(**{"delivery_dead": 0, "deliveries_pending": 0, **samples[-1]}), flush=True)
        report(samples)
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "samples": samples}, indent=1) + "\n")
        if args.chart:
            chart(samples, args.chart, f"Herald, {args.minutes} minutes at {args.rate:g} msgs/s to {args.fanout} "
                  f"subscriptions ({args.failing} failing), {args.retention_minutes}-minute retention")
    finally:
        if soak is not None:
            soak.stop()
        bench.close()


if __name__ == "__main__":
    main()

"""What one delivery costs PostgreSQL: rows read (tuples returned and fetched), commits, inserts, updates and WAL
bytes per delivery, while 2 real workers and the scheduler drain N deliveries to a local receiver; then the queries
that read the most (pg_stat_statements) and the tables scanned whole.

    python bench/rows_per_delivery.py [--deliveries 3000] [--preload 0] [--rate 0]

`--rate 100` publishes the deliveries one message at a time at 100 a second while the workers run, instead of
draining a backlog: the cost of a shop's ordinary day, publishes included.

`--preload 10000000` first fills `message`, `delivery` and `attempt` with that many finished rows (SQL, a few
minutes), so the figures show whether the cost grows with the tables. PostgreSQL runs with its production defaults
for durability (fsync, full-page writes, synchronous commit), so the WAL figure is what a real server writes.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from delivery.management import localredis  # noqa: E402
from tests.stack import Postgres  # noqa: E402


class MeasuredPostgres(Postgres):
    explain_slower_than_ms = -1  # >=0: the plan of every statement slower than this goes to the server's log

    def options(self) -> str:
        explain = (" -c session_preload_libraries=auto_explain -c auto_explain.log_analyze=on "
                   "-c auto_explain.log_nested_statements=on "
                   f"-c auto_explain.log_min_duration={self.explain_slower_than_ms}"
                   if self.explain_slower_than_ms >= 0 else "")
        return (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.workdir} -c max_connections=200 "
                "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all "
                "-c pg_stat_statements.track_planning=on "
                "-c shared_buffers=512MB -c max_wal_size=4GB -c random_page_cost=1.1" + explain)


SECONDARY_INDEXES = """
    SELECT pg_get_indexdef(i.indexrelid), i.indexrelid::regclass::text FROM pg_index i
    WHERE i.indrelid IN ('herald_delivery_message'::regclass, 'herald_delivery_delivery'::regclass,
                         'herald_delivery_attempt'::regclass)
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)"""


def preload(db: psycopg.Connection, n: int) -> None:
    """N finished rows in each table, loaded as a restore would: the secondary indexes dropped and built again
    afterwards, foreign keys not checked row by row (the rows are made consistent). Through the 12 indexes of
    `delivery` row by row, 10,000,000 rows took longer than 20 minutes."""
    indexes = db.execute(SECONDARY_INDEXES).fetchall()
    for _, name in indexes:
        db.execute(f"DROP INDEX {name}")
    db.execute("SET session_replication_role = replica")  # no foreign-key triggers for the load
    for statement in PRELOAD:
        db.execute(statement, {"n": n})
    db.execute("SET session_replication_role = DEFAULT")
    db.execute("SET maintenance_work_mem = '1GB'")
    for definition, _ in indexes:
        db.execute(definition)
    db.execute("VACUUM ANALYZE")


def manage(env: dict, *args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], env=env, check=True, capture_output=True, text=True,
                          cwd=ROOT).stdout


SETUP = """
from django.contrib.auth import get_user_model
from subscriptions.models import Endpoint, Subscription, Topic
owner = get_user_model().objects.create(username="bench")
topic = Topic.objects.create(owner=owner, name="t")
endpoint = Endpoint.objects.create(owner=owner, url="{url}")
Subscription.objects.create(topic=topic, endpoint=endpoint, status="confirmed")
"""
PUBLISH = """
from subscriptions.models import Topic
from delivery.engine.intake.publishing import Entry, message_publish_batch
topic = Topic.objects.get(name="t")
for start in range(0, {n}, 100):
    message_publish_batch(topic=topic, entries=[Entry(payload={{"n": k, "pad": "x" * {pad}}})
                                                for k in range(start, min(start + 100, {n}))])
"""
# Publishing at a steady rate (--rate), one message per publish, while the workers run: a shop's ordinary day,
# where a worker claims and records a delivery or two at a time instead of a drain's 64.
STEADY = """
import time
from subscriptions.models import Topic
from delivery.engine.intake.publishing import Entry, message_publish_batch
topic = Topic.objects.get(name="t")
started = time.perf_counter()
for k in range({n}):
    time.sleep(max(0.0, started + k / {rate} - time.perf_counter()))
    message_publish_batch(topic=topic, entries=[Entry(payload={{"n": k}})])
"""
PRELOAD = [
    """INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type, subject, attributes,
           published_at, request_fingerprint, fanout_pending, fanout_skipped, broadcast)
       SELECT gen_random_uuid(), t.id, '{"old": true}', false, 'old', '', '{}', now() - interval '2 days', '', false,
              '{}', false FROM herald_subscriptions_topic t, generate_series(1, %(n)s)""",
    """INSERT INTO herald_delivery_delivery (message_id, subscription_id, endpoint_id, owner_id, status, attempt_count,
           next_attempt_at, first_attempt_at, last_attempt_at, delivered_at, finished_at, dead_letter_reason,
           budget_attempts, created_at)
       SELECT m.id, s.id, s.endpoint_id, t.owner_id, 'succeeded', 1, NULL, m.published_at, m.published_at,
              m.published_at, m.published_at, '', 0, m.published_at
       FROM herald_delivery_message m JOIN herald_subscriptions_topic t ON t.id = m.topic_id
       JOIN herald_subscriptions_subscription s ON s.topic_id = t.id WHERE m.event_type = 'old'""",
    """INSERT INTO herald_delivery_attempt (delivery_id, number, queue, started_at, duration_ms, request_url,
           request_headers, request_body, response_status, response_headers, response_body, error_class,
           error_detail, outcome)
       SELECT d.id, 1, 'deliveries', d.created_at, 3, 'http://127.0.0.1:9/old', '{}', '', 200, '{}', '', '', '',
              'success' FROM herald_delivery_delivery d WHERE d.status = 'succeeded'""",
]


def postgres_processes():
    """(pid, the fields of /proc/<pid>/stat after the command) of every PostgreSQL process on this machine."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                command, fields = stat.read().rsplit(")", 1)
        except OSError:
            continue
        if command.endswith("(postgres"):
            yield int(pid), fields.split()


def postgres_cpu_seconds() -> float:
    """CPU time (user + system) of every PostgreSQL process on this machine so far, from /proc."""
    ticks = sum(int(fields[11]) + int(fields[12]) for _, fields in postgres_processes())  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of one running process so far, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuLimit:
    """PostgreSQL's processes held to `cores` of CPU (a cgroup v1 `cpu` quota; new backends inherit it from the
    postmaster): the drain is then bound by PostgreSQL, which is what the capacity model predicts."""

    ROOT_GROUP = "/sys/fs/cgroup/cpu"

    def __init__(self, cores: float):
        self.group = f"{self.ROOT_GROUP}/herald-bench-{os.getpid()}"
        os.makedirs(self.group)
        period = 100_000
        self.write("cpu.cfs_period_us", period)
        self.write("cpu.cfs_quota_us", int(cores * period))
        for pid, _ in postgres_processes():
            self.write("cgroup.procs", pid)

    def write(self, name: str, value) -> None:
        with open(f"{self.group}/{name}", "w") as handle:
            handle.write(str(value))

    def release(self) -> None:
        with open(f"{self.group}/cgroup.procs") as handle:
            pids = handle.read().split()
        for pid in pids:
            try:
                with open(f"{self.ROOT_GROUP}/cgroup.procs", "w") as handle:
                    handle.write(pid)
            except OSError:
                pass
        os.rmdir(self.group)


def received(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=5) as answer:
        return int(answer.read())


def wait_for(port: int, count: int) -> None:
    """Until the receiver has had `count` requests. Progress is read from the receiver, not the database: a poll
    there would count in the figures."""
    started = time.time()
    while received(port) < count:
        time.sleep(0.1)
        if time.time() - started > 600:
            raise SystemExit("not drained in 10 minutes")


def disk_per_delivery(db, n: int, *, preloaded: int = 0) -> None:
    """What the finished records take on disk per delivery (tables, their indexes and TOAST, after a VACUUM): the
    retention a shop keeps, times its deliveries, is its disk (docs/embedding.md, "In production")."""
    db.execute("VACUUM (ANALYZE) herald_delivery_message, herald_delivery_delivery, herald_delivery_attempt, "
               "herald_delivery_exchange")
    total = n + preloaded
    rows = db.execute("""SELECT relname, pg_table_size(relid), pg_indexes_size(relid) FROM pg_stat_user_tables
                         WHERE relname IN ('herald_delivery_message', 'herald_delivery_delivery',
                                           'herald_delivery_attempt', 'herald_delivery_exchange')
                         ORDER BY relname""").fetchall()
    print("\ndisk per delivery (each table with its TOAST, then its indexes):")
    for table, size, indexes in rows:
        print(f"  {table:34s} {size / total:8.0f} B + indexes {indexes / total:6.0f} B")
    whole = sum(size + indexes for _, size, indexes in rows)
    print(f"  all {whole / total:,.0f} B per delivery: {whole / total * 1e6 / 2**30:.2f} GiB per million deliveries "
          f"(one attempt each, one message per delivery)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deliveries", type=int, default=3000)
    parser.add_argument("--preload", type=int, default=0)
    parser.add_argument("--payload-bytes", type=int, default=0,
                        help="pad each message's payload by this many bytes (the disk per delivery grows with it)")
    parser.add_argument("--rate", type=float, default=0,
                        help="publish the deliveries one message at a time at this rate while the workers run "
                             "(the publishes' cost is then in the figures too), instead of draining a backlog")
    parser.add_argument("--explain-slower-than-ms", type=int, default=-1,
                        help="log the plans of statements slower than this (PostgreSQL's log, path printed)")
    parser.add_argument("--postgres-cores", type=float, default=0,
                        help="hold PostgreSQL to this much CPU during the drain (root; cgroup v1), to check the "
                             "capacity model against a drain bound by PostgreSQL")
    parser.add_argument("--model-ms", type=float, default=0.61,
                        help="the capacity model's PostgreSQL CPU per delivery, to compare with --postgres-cores")
    args = parser.parse_args()
    MeasuredPostgres.explain_slower_than_ms = args.explain_slower_than_ms
    n = args.deliveries
    work = tempfile.mkdtemp(prefix="herald-rows-")
    os.chmod(work, 0o755)
    postgres = MeasuredPostgres(work).start()
    print(f"PostgreSQL's log: {work}/pg.log", flush=True)
    redis_port = localredis.free_port()
    redis = localredis.start(redis_port, os.path.join(work, "redis"))
    receiver_port = localredis.free_port()
    receiver = subprocess.Popen([sys.executable, "bench/receiver.py", str(receiver_port)], cwd=ROOT,
                                stdout=subprocess.PIPE)
    receiver.stdout.readline()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "DATABASE_URL": postgres.url,
           "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "SECRET_KEY": "bench",
           "HERALD_ALLOWED_NETWORKS": "127.0.0.0/8", "HERALD_REQUIRE_CONFIRMATION": "false",
           "RQ_LOG_LEVEL": "WARNING"}
    processes = [receiver, redis]
    limit = None
    try:
        manage(env, "migrate", "-v0")
        manage(env, "shell", "-c", SETUP.format(url=f"http://127.0.0.1:{receiver_port}/fast/0"))
        db = psycopg.connect(postgres.url.replace("postgres://", "postgresql://"), autocommit=True)
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        if args.preload:
            started = time.time()
            preload(db, args.preload)
            sizes = db.execute("""SELECT relname, n_live_tup FROM pg_stat_user_tables WHERE relname IN
                ('herald_delivery_message', 'herald_delivery_delivery', 'herald_delivery_attempt')""").fetchall()
            print(f"preloaded in {time.time() - started:.0f} s: " + ", ".join(f"{t} {c:,}" for t, c in sizes),
                  flush=True)
        if not args.rate:
            manage(env, "shell", "-c", PUBLISH.format(n=n, pad=args.payload_bytes))
        if args.preload or not args.rate:
            # (Not of empty tables: a plan cached by a connection while a table is a page or two long reads it
            # whole on every run until the next ANALYZE, which is what a foreign-key check did at a steady rate,
            # each insert scanning the growing table; docs/benchmarks.md, "The steady rate".)
            db.execute("ANALYZE")
        db.execute("SELECT pg_stat_statements_reset()")
        db.execute("SELECT pg_stat_reset()")
        wal_before = db.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        cpu_before = postgres_cpu_seconds()
        if args.postgres_cores:
            limit = CpuLimit(args.postgres_cores)
        time.sleep(0.5)
        started = time.time()
        workers = [subprocess.Popen([sys.executable, "manage.py", "rqworker", "deliveries", "retries"], env=env,
                                    cwd=ROOT) for _ in range(2)]
        cron = subprocess.Popen([sys.executable, "manage.py", "herald_cron"], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL)
        processes += workers + [cron]
        workers_before = 0.0
        if args.rate:
            time.sleep(3)  # the workers and the scheduler started
            workers_before = sum(process_cpu_seconds(process.pid) for process in workers)
            started = time.time()
            processes.append(subprocess.Popen([sys.executable, "manage.py", "shell", "-c",
                                               STEADY.format(n=n, rate=args.rate)], env=env, cwd=ROOT))
        wait_for(receiver_port, n)
        elapsed = time.time() - started
        time.sleep(2)  # the last answers recorded
        cpu = postgres_cpu_seconds() - cpu_before  # (ended processes' time is lost: connections live on)
        worker_cpu = sum(process_cpu_seconds(process.pid) for process in workers) - workers_before
        for process in workers + [cron]:
            process.terminate()
        for process in workers + [cron]:
            process.wait()
        time.sleep(1)  # the statistics collector's last report
        wal = db.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [wal_before]).fetchone()[0]
        stats = db.execute("""SELECT tup_returned, tup_fetched, xact_commit, tup_inserted, tup_updated
                              FROM pg_stat_database WHERE datname = current_database()""").fetchone()
        returned, fetched, commits, inserted, updated = (value / n for value in stats)
        how = f"published at {args.rate:g}/s and delivered" if args.rate else "drained"
        print(f"{n:,} deliveries {how} by 2 workers in {elapsed:.1f} s ({n / elapsed:.0f}/s)")
        if args.postgres_cores:
            predicted = args.postgres_cores / (args.model_ms / 1000)
            print(f"PostgreSQL held to {args.postgres_cores:g} cores: the capacity model ({args.model_ms} ms of "
                  f"PostgreSQL CPU per delivery) predicts at most {predicted:.0f} deliveries/s; measured "
                  f"{n / elapsed:.0f}/s ({n / elapsed / predicted:.0%} of the prediction)")
        print(f"per delivery: tuples returned {returned:.1f}, fetched {fetched:.1f}, read {returned + fetched:.1f}; "
              f"commits {commits:.2f}, inserts {inserted:.2f}, updates {updated:.2f}, WAL {float(wal) / n:,.0f} bytes")
        # The same in Herald's tables only: the rest is PostgreSQL's catalogs, read by each new connection to fill
        # its caches (a cost per process start, not per delivery).
        user_returned, user_fetched = (float(value) / n for value in db.execute(
            """SELECT (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables)
                      + (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes),
                      (SELECT coalesce(sum(idx_tup_fetch), 0) FROM pg_stat_user_tables)""").fetchone())
        print(f"  in Herald's tables: returned {user_returned:.1f}, fetched {user_fetched:.1f}, read "
              f"{user_returned + user_fetched:.1f}; in PostgreSQL's catalogs (filled once per connection) "
              f"{returned + fetched - user_returned - user_fetched:.1f}")
        since = "from the first publish" if args.rate else "from their start"
        print(f"workers' CPU: {worker_cpu:.2f} s, {worker_cpu / n * 1000:.2f} ms per delivery ({since})")
        per_core = n / cpu if cpu else float("inf")
        print(f"PostgreSQL CPU: {cpu:.2f} s for {n:,} deliveries, {cpu / n * 1000:.2f} ms each: "
              f"{per_core:,.0f} deliveries per second per PostgreSQL core; {1e9 / (float(wal) / n):,.0f} deliveries "
              f"per GB of WAL")
        print("\nqueries by rows read (pg_stat_statements; per delivery):")
        for calls, rows, blocks, query in db.execute(
                """SELECT calls, rows, shared_blks_hit + shared_blks_read,
                          left(regexp_replace(query, '\\s+', ' ', 'g'), 140)
                   FROM pg_stat_statements WHERE calls > 0 AND query NOT LIKE '%%pg_stat%%'
                   ORDER BY shared_blks_hit + shared_blks_read DESC LIMIT 15""").fetchall():
            print(f"  {calls:6d} calls {rows / n:7.2f} rows {blocks / n:7.1f} blocks  {query}")
        for order, most in (("total_exec_time + total_plan_time", 20), ("calls", 15)):
            print(f"\nqueries by {order} (pg_stat_statements; calls, then ms executing and planning per delivery):")
            for calls, total, planning, query in db.execute(
                    f"""SELECT calls, total_exec_time, total_plan_time,
                               left(regexp_replace(query, '\\s+', ' ', 'g'), 140)
                        FROM pg_stat_statements WHERE calls > 0 AND query NOT LIKE '%%pg_stat%%'
                        ORDER BY {order} DESC LIMIT {most}""").fetchall():
                print(f"  {calls / n:6.2f} calls {total / n:7.3f} ms {planning / n:7.3f} ms  {query}")
        print("\ntables (per delivery):")
        for table, seq, seq_rows, idx, idx_rows in db.execute(
                """SELECT relname, seq_scan, seq_tup_read, idx_scan, coalesce(idx_tup_fetch, 0)
                   FROM pg_stat_user_tables WHERE seq_tup_read + coalesce(idx_tup_fetch, 0) > 0
                   ORDER BY seq_tup_read + coalesce(idx_tup_fetch, 0) DESC LIMIT 10""").fetchall():
            print(f"  {table:40s} seq scans {seq:6d} ({seq_rows / n:8.1f} rows)  index scans {idx:7d} "
                  f"({idx_rows / n:6.1f} rows)")
        print("\nindexes (entries read per delivery):")
        for table, index, scans, entries in db.execute(
                """SELECT relname, indexrelname, idx_scan, idx_tup_read FROM pg_stat_all_indexes
                   WHERE idx_tup_read > 0 ORDER BY idx_tup_read DESC LIMIT 15""").fetchall():
            print(f"  {table:34s} {index:44s} scans {scans:7d}  entries {entries / n:6.2f}")
        disk_per_delivery(db, n, preloaded=args.preload)
        unfinished = db.execute("SELECT count(*) FROM herald_delivery_delivery WHERE status IN "
                                "('pending', 'in_flight')").fetchone()[0]
        assert unfinished == 0, f"{unfinished} deliveries not finished"
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        postgres.stop()
        if limit is not None:
            limit.release()


if __name__ == "__main__":
    main()

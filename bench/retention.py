"""What retention's purge costs per row: N finished deliveries (each with its message and two attempts) past their
retention, purged by `engine/scheduler/retention.purge` as the scheduler runs it; the CPU of the purging process
and of its PostgreSQL backend, per 1,000 deliveries purged, and the wall time.

    python bench/retention.py [--deliveries 20000]

Beside it, the same run's ceiling: PostgreSQL deleting the same rows by itself (three `DELETE … WHERE` statements,
no batches), which no purge in batches can beat.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stack import Postgres  # noqa: E402

LOAD = """
    INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type, subject, attributes,
                                         published_at, request_fingerprint, fanout_pending, fanout_skipped, broadcast)
    SELECT ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid, %(topic)s, '{"n": 1}', false, 'old', '',
           '{}', now() - interval '40 days', '', false, '{}', false
    FROM generate_series(1, %(n)s) g;
    INSERT INTO herald_delivery_delivery (message_id, subscription_id, endpoint_id, owner_id, status, attempt_count,
                                          dead_letter_reason, budget_attempts, created_at, finished_at)
    SELECT ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid, %(subscription)s, %(endpoint)s, %(owner)s,
           'succeeded', 2, '', 0, now() - interval '40 days', now() - interval '40 days'
    FROM generate_series(1, %(n)s) g;
    INSERT INTO herald_delivery_attempt (delivery_id, number, queue, started_at, duration_ms, request_url,
                                         request_headers, request_body, response_headers, response_body, error_class,
                                         error_detail, outcome)
    SELECT d.id, k, 'deliveries', now() - interval '40 days', 3, 'http://127.0.0.1:9/x', '{}', '{"n": 1}', '{}', '',
           '', '', 'succeeded'
    FROM herald_delivery_delivery d CROSS JOIN generate_series(1, 2) k;
    ANALYZE;
"""
CEILING = """
    DELETE FROM herald_delivery_attempt; DELETE FROM herald_delivery_delivery; DELETE FROM herald_delivery_message;
"""


def backend_cpu(cursor) -> float:
    cursor.execute("SELECT pg_backend_pid()")
    fields = Path(f"/proc/{cursor.fetchone()[0]}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=20000)
    args = parser.parse_args()
    postgres = Postgres(tempfile.mkdtemp(prefix="herald-retention-")).start()
    try:
        os.environ.update(DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=postgres.url)
        import django  # noqa: PLC0415 (after the database's address is set)

        django.setup()
        from django.contrib.auth import get_user_model  # noqa: PLC0415
        from django.core.management import call_command  # noqa: PLC0415
        from django.db import connection  # noqa: PLC0415

        from delivery.engine.scheduler import retention  # noqa: PLC0415
        from subscriptions.models import Endpoint, Subscription, Topic  # noqa: PLC0415

        call_command("migrate", verbosity=0)
        owner = get_user_model().objects.create_user("retention")
        topic = Topic.objects.create(owner=owner, name="old")
        endpoint = Endpoint.objects.create(owner=owner, url="http://127.0.0.1:9/x")
        subscription = Subscription.objects.create(topic=topic, endpoint=endpoint, secret="whsec_" + "a" * 32)
        n = args.deliveries
        figures = {}
        for name in ("purge", "ceiling"):
            with connection.cursor() as cursor:
                cursor.execute(LOAD, {"n": n, "topic": topic.id, "subscription": subscription.id,
                                      "endpoint": endpoint.id, "owner": owner.id})
                backend, process, wall = backend_cpu(cursor), time.process_time(), time.perf_counter()
                if name == "purge":
                    purged = retention.purge()
                    assert purged["deliveries"] == n and purged["messages"] == n, purged
                else:
                    cursor.execute(CEILING)
                figures[name] = ((backend_cpu(cursor) - backend) * 1000 / n * 1000,
                                 (time.process_time() - process) * 1000 / n * 1000, time.perf_counter() - wall)
        print(f"retention: {n:,} finished deliveries (each with its message and 2 attempts), 40 days old")
        for name, (backend, process, wall) in figures.items():
            words = "retention.purge()" if name == "purge" else "ceiling: 3 plain DELETEs"
            print(f"  {words:<28} {wall:6.2f} s; CPU ms per 1,000 deliveries: postgres {backend:7.1f}, "
                  f"purging process {process:7.1f}")
    finally:
        postgres.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

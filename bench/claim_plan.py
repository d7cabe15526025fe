"""The fair claim's queries on a big table: 1,000,000 due deliveries of one owner and 1 of another. Prints each
query's plan (EXPLAIN ANALYZE, BUFFERS) and time, and which rows a claim of 64 takes.

    python bench/claim_plan.py [--rows 1000000]
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="herald-claim-plan-")
    os.chmod(workdir, 0o755)  # the postgres user runs the cluster in it
    postgres = Postgres(os.path.join(workdir, "pg")).start()
    os.environ.update(DATABASE_URL=postgres.url, DJANGO_SETTINGS_MODULE="project.settings", SECRET_KEY="plan",
                      REDIS_URL="redis://127.0.0.1:1/0")
    import django  # noqa: PLC0415 (after the database exists)

    django.setup()
    from django.core.management import call_command  # noqa: PLC0415
    from django.db import connection  # noqa: PLC0415
    from django.utils import timezone  # noqa: PLC0415

    from delivery.engine import leases  # noqa: PLC0415

    try:
        call_command("migrate", verbosity=0)
        with connection.cursor() as c:
            c.execute("INSERT INTO auth_user (id, username, password, is_superuser, is_staff, is_active, first_name, "
                      "last_name, email, date_joined) VALUES (1, 'flood', '', false, false, true, '', '', '', now()), "
                      "(2, 'quiet', '', false, false, true, '', '', '', now())")
            c.execute("INSERT INTO herald_subscriptions_topic (id, owner_id, name, description, created_at, "
                      "updated_at) VALUES (1, 1, 'flood', '', now(), now()), (2, 2, 'quiet', '', now(), now())")
            for n, owner in ((1, 1), (2, 2)):
                c.execute("INSERT INTO herald_subscriptions_endpoint (id, owner_id, url, state, state_reason, "
                          "consecutive_failures, window_attempts, window_failures, created_at) VALUES "
                          "(%s, %s, %s, 'active', '', 0, 0, 0, now())", [n, owner, f"http://127.0.0.1:9/{n}"])
            started = time.perf_counter()
            c.execute("""INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type,
                         subject, attributes, published_at, request_fingerprint, fanout_pending, fanout_skipped)
                         SELECT gen_random_uuid(), 1, '1', false, 'flood', '', '{}', now() - interval '1 hour',
                                '', false, '{}' FROM generate_series(1, %s)""", [args.rows])
            print(f"{args.rows:,} messages in {time.perf_counter() - started:.0f} s", flush=True)
        print("(subscriptions are made through the ORM: their columns are many)", flush=True)
        from subscriptions.models import Endpoint, Subscription, Topic  # noqa: PLC0415

        subs = [Subscription.objects.create(topic=Topic.objects.get(id=n), endpoint=Endpoint.objects.get(id=n),
                                            status="confirmed", secret="whsec_x") for n in (1, 2)]
        with connection.cursor() as c:
            c.execute("""INSERT INTO herald_delivery_delivery (message_id, subscription_id, endpoint_id, owner_id,
                         status, next_attempt_at, attempt_count, budget_attempts, dead_letter_reason, created_at)
                         SELECT id, %s, 1, 1, 'pending', published_at, 0, 0, '', now()
                         FROM herald_delivery_message WHERE topic_id = 1""", [subs[0].id])
            c.execute("""INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type,
                         subject, attributes, published_at, request_fingerprint, fanout_pending, fanout_skipped)
                         VALUES (gen_random_uuid(), 2, '1', false, 'quiet', '', '{}', now(), '', false, '{}')""")
            c.execute("""INSERT INTO herald_delivery_delivery (message_id, subscription_id, endpoint_id, owner_id,
                         status, next_attempt_at, attempt_count, budget_attempts, dead_letter_reason, created_at)
                         SELECT id, %s, 2, 2, 'pending', published_at, 0, 0, '', now()
                         FROM herald_delivery_message WHERE topic_id = 2""", [subs[1].id])
            c.execute("VACUUM ANALYZE herald_delivery_delivery")
        now = timezone.now()
        for name, function in (("shares with due work", lambda: leases.shares_with_due_work(now)),
                               ("the claim's read (64 slots)", lambda: leases.due_in_turn(now, 256, []))):
            timings = []
            for _ in range(5):
                started = time.perf_counter()
                function()
                timings.append((time.perf_counter() - started) * 1000)
            print(f"{name}: median {sorted(timings)[2]:.2f} ms over 5 runs")
        shares = leases.shares_with_due_work(now)
        rows, _ = leases.due_in_turn(now, 256, [])
        print(f"(owner, tenant) shares with due work: {shares}; the quiet owner's delivery is row "
              f"{[r[1] for r in rows].index(2) + 1} of {len(rows)} read")
        with connection.cursor() as c:
            table = "herald_delivery_delivery"
            for title, sql, params in (
                ("skip scan, one step", f"EXPLAIN (ANALYZE, BUFFERS) SELECT owner_id, COALESCE(tenant_id, 0) "
                 f"FROM {table} WHERE status = 'pending' AND (owner_id, COALESCE(tenant_id, 0)) > (%s, 0) "
                 "ORDER BY owner_id, COALESCE(tenant_id, 0) LIMIT 1", [1]),
                ("the claim's read: each share's oldest due rows",
                 f"""EXPLAIN (ANALYZE, BUFFERS) SELECT c.id FROM unnest(%s::bigint[]) AS o(owner_id)
                     CROSS JOIN LATERAL (SELECT d.id FROM {table} d
                         WHERE (d.owner_id, COALESCE(d.tenant_id, 0), d.next_attempt_at)
                               BETWEEN (o.owner_id, 0, '-infinity') AND (o.owner_id, 0, %s)
                         AND d.status = 'pending' AND NOT (d.endpoint_id = ANY(%s::bigint[]))
                         ORDER BY d.owner_id, COALESCE(d.tenant_id, 0), d.next_attempt_at LIMIT 128) c""",
                 [[1, 2], now, []])):
                c.execute(sql, params)
                print(f"\n{title}:\n" + "\n".join(row[0] for row in c.fetchall()))
    finally:
        connection.close()
        postgres.stop()


if __name__ == "__main__":
    main()

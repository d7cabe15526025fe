"""The fair claim's queries on a big table: 1,000,000 due deliveries of one owner and 1 of another. Prints each
query's plan (EXPLAIN ANALYZE, BUFFERS) and time, and which rows a claim of 64 takes, also while the big owner's
endpoint has no room left.

    python bench/claim_plan.py [--rows 1000000]
"""

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fresh import django_on_fresh_postgres  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    postgres = django_on_fresh_postgres("herald-claim-plan-", SECRET_KEY="plan")
    from django.db import connection  # noqa: PLC0415
    from django.utils import timezone  # noqa: PLC0415

    from delivery.engine.claiming import due_work  # noqa: PLC0415

    try:
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
        full = Counter({1: 32})  # the flood's endpoint has no room left: its backlog must not be read to skip it
        for name, function in (
                ("shares with due work", lambda: due_work.shares_with_due_work(now)),
                ("the claim's read (64 slots)", lambda: due_work.due_in_turn(now, 64, 32, Counter())),
                ("the claim's read, the flood's endpoint full", lambda: due_work.due_in_turn(now, 64, 32, full))):
            timings = []
            for _ in range(5):
                started = time.perf_counter()
                function()
                timings.append((time.perf_counter() - started) * 1000)
            print(f"{name}: median {sorted(timings)[2]:.2f} ms over 5 runs")
        shares = due_work.shares_with_due_work(now)
        rows, _ = due_work.due_in_turn(now, 64, 32, Counter())
        print(f"(owner, tenant) shares with due work: {shares}; the quiet owner's delivery is row "
              f"{[r[1] for r in rows].index(2) + 1} of {len(rows)} read")
        rows, _ = due_work.due_in_turn(now, 64, 32, full)
        print(f"with the flood's endpoint full: {len(rows)} rows read, the quiet owner's among them: "
              f"{any(r[1] == 2 for r in rows)}")
        statements = []

        def capture(execute, sql, params, many, context):
            statements.append((sql, params))
            return execute(sql, params, many, context)

        with connection.execute_wrapper(capture):
            due_work.due_in_turn(now, 64, 32, Counter())
        with connection.cursor() as c:
            for sql, params in statements:
                c.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
                print(f"\n{' '.join(sql.split())[:100]}…:\n" + "\n".join(row[0] for row in c.fetchall()))
    finally:
        connection.close()
        postgres.stop()


if __name__ == "__main__":
    main()

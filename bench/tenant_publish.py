"""Publishing to one tenant on a topic that 100,000 tenants subscribe to (docs/tenants.md): the publish reads the
owner's subscriptions and that tenant's only, so it costs what the same publish costs on a topic holding only those.

    python bench/tenant_publish.py [--tenants 100000] [--publishes 300]

Prints, for the big topic and for the ceiling (a topic with only the same tenant's two subscriptions), the median
and p99 of `delivery.events.publish(..., tenant=…)` (message and deliveries written and committed; the pump is not
asked for, as in the test outbox, so Redis is not part of the figure), and the plan of the fan-out's read.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fresh import django_on_fresh_postgres  # noqa: E402


def timed(function, count: int) -> list[float]:
    timings = []
    for n in range(count):
        started = time.perf_counter()
        function(n)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def summary(timings: list[float]) -> str:
    ordered = sorted(timings)
    return (f"median {statistics.median(ordered):6.2f} ms   p99 {ordered[int(len(ordered) * 0.99) - 1]:6.2f} ms   "
            f"max {ordered[-1]:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=100_000)
    parser.add_argument("--publishes", type=int, default=300)
    args = parser.parse_args()
    postgres = django_on_fresh_postgres(
        "herald-tenant-publish-", SECRET_KEY="bench", HERALD_ALLOWED_NETWORKS="127.0.0.0/8",
        HERALD_REQUIRE_CONFIRMATION="false", HERALD_MAX_TENANTS_PER_OWNER="10000000",
        HERALD_MAX_SUBSCRIPTIONS_PER_OWNER="10000000")
    from django.contrib.auth import get_user_model  # noqa: PLC0415
    from django.db import connection  # noqa: PLC0415

    from delivery.engine.accounts.subscribing import subscription_create, topic_create  # noqa: PLC0415
    from delivery.engine.intake import fanout, publishing  # noqa: PLC0415
    from delivery.events import publish  # noqa: PLC0415
    from delivery.tenants import tenant_create  # noqa: PLC0415
    from subscriptions.models import Subscription, Tenant  # noqa: PLC0415

    try:
        publishing.capturing.set(True)  # written and committed, no pump asked for (no Redis in the figure)
        owner = get_user_model().objects.create_user("shop")
        big, _ = topic_create(owner=owner, name="big", open_to_tenants=True)
        alone, _ = topic_create(owner=owner, name="alone", open_to_tenants=True)
        subscription_create(topic=big, endpoint="http://127.0.0.1:9/own")
        subscription_create(topic=alone, endpoint="http://127.0.0.1:9/own")
        template, _ = subscription_create(topic=big, endpoint="http://127.0.0.1:9/template")
        started = time.perf_counter()
        with connection.cursor() as c:
            c.execute("""INSERT INTO herald_subscriptions_tenant (owner_id, external_id, name, metadata, created_at)
                         SELECT %s, 't' || n, 'Tenant ' || n, '{}', now() FROM generate_series(1, %s) n""",
                      [owner.id, args.tenants])
            c.execute("""INSERT INTO herald_subscriptions_endpoint (owner_id, tenant_id, url, state, state_reason,
                         consecutive_failures, window_attempts, window_failures, created_at)
                         SELECT %s, id, 'http://127.0.0.1:9/' || external_id, 'active', '', 0, 0, 0, now()
                         FROM herald_subscriptions_tenant WHERE owner_id = %s""", [owner.id, owner.id])
            c.execute("""SELECT column_name FROM information_schema.columns
                         WHERE table_name = 'herald_subscriptions_subscription'
                           AND column_name NOT IN ('id', 'keys_id', 'tenant_id', 'endpoint_id')""")
            columns = [row[0] for row in c.fetchall()]
            listed = ", ".join(columns)
            copied = ", ".join(f"s.{name}" for name in columns)
            c.execute(f"""INSERT INTO herald_subscriptions_subscription ({listed}, keys_id, tenant_id, endpoint_id)
                          SELECT {copied}, gen_random_uuid(), e.tenant_id, e.id
                          FROM herald_subscriptions_subscription s, herald_subscriptions_endpoint e
                          WHERE s.id = %s AND e.tenant_id IS NOT NULL""", [template.id])
            c.execute("DELETE FROM herald_subscriptions_subscription WHERE id = %s", [template.id])
            c.execute("VACUUM ANALYZE")
        print(f"{args.tenants:,} tenants, each with a subscription to 'big', in {time.perf_counter() - started:.0f} s",
              flush=True)
        chosen, _ = tenant_create(owner=owner, external_id="chosen", name="Chosen")
        for topic in (big, alone):
            for n in (1, 2):
                subscription_create(topic=topic, endpoint=f"http://127.0.0.1:9/chosen/{n}", tenant=chosen)
        print(f"'big': {Subscription.objects.filter(topic=big).count():,} subscriptions; 'alone': "
              f"{Subscription.objects.filter(topic=alone).count()} (the owner's and the chosen tenant's two)")
        for topic in (big, alone):
            read = fanout.topic_subscriptions(topic.id, fanout.Audience(chosen.id))
            assert len(read) == 3, len(read)
        for name in ("big", "alone"):  # warm both
            timed(lambda n, name=name: publish(name, {"n": n}, owner=owner, tenant="chosen"), 20)
        rows = {}
        for name in ("big", "alone"):
            rows[name] = timed(lambda n, name=name: publish(name, {"n": n}, owner=owner, tenant="chosen"),
                               args.publishes)
        print(f"publish to one tenant on 'big'   ({args.tenants:,} tenants): {summary(rows['big'])}")
        print(f"ceiling: the same on 'alone'     (3 subscriptions):     {summary(rows['alone'])}")
        with connection.cursor() as c:
            query = str(Subscription.objects.filter(fanout.Audience(chosen.id).subscriptions(), topic_id=big.id)
                        .values_list("id").query)
            c.execute(f"EXPLAIN (ANALYZE, BUFFERS) {query}")
            print("\nthe fan-out's read on 'big':\n" + "\n".join(row[0] for row in c.fetchall()))
        assert Tenant.objects.count() == args.tenants + 1
    finally:
        connection.close()
        postgres.stop()


if __name__ == "__main__":
    main()

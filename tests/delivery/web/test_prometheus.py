"""The Prometheus scrape endpoint reads the shared state, so every process's work shows in one scrape, at a cost
that grows with the backlog and never with the finished history."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from delivery.models import Attempt, Delivery, Message
from delivery.rules.vocabulary import DeliveryStatus
from subscriptions.models import Subscription
from tests.conftest import publish, settle, subscribe, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def scrape(client, token="s3cret"):
    return client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")


def samples(response) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


def test_metrics_need_the_token_and_are_off_without_one(client, settings):
    assert scrape(client).status_code == 404
    settings.HERALD_METRICS_TOKEN = "s3cret"
    assert scrape(client, "wrong").status_code == 401
    assert client.get("/metrics").status_code == 401


def test_metrics_report_deliveries_dead_letters_endpoints_attempts_and_queues(client, settings, api, receiver,
                                                                               run_worker):
    settings.HERALD_METRICS_TOKEN = "s3cret"
    receiver.script = lambda request: Reply(status=410 if request.json()["data"] == "gone" else 200)
    topic, _ = subscribe(api, receiver)
    publish(api, topic, "ok")
    settle()
    publish(api, topic, "gone")
    settle()

    counted_at_last = (("herald_deliveries_finished_total", (("status", "dead_lettered"),)),
                       ("herald_attempt_duration_seconds_count", ()))
    # the worker counts just after its commit, which settle() sees: wait for that moment, not a sleep
    wait_until(lambda: [samples(scrape(client)).get(key) for key in counted_at_last] == [1, 2])
    values = samples(scrape(client))
    assert values[("herald_deliveries", (("status", "pending"),))] == 0  # the unfinished: both have finished
    assert ("herald_deliveries", (("status", "succeeded"),)) not in values  # the finished are counted (below)
    assert values[("herald_recent_dead_letters", (("reason", "permanent_failure"),))] == 1
    assert values[("herald_endpoints", (("state", "frozen"),))] == 1
    assert values[("herald_recent_attempts", (("outcome", "success"),))] == 1
    assert values[("herald_recent_attempts", (("outcome", "permanent_failure"),))] == 1
    assert values[("herald_queue_jobs", (("queue", "deliveries"),))] == 0

    # What happened, counted by the worker process (another process than this scrape's) in Redis, only growing
    counted = {key: value for key, value in values.items() if key[0].endswith(("_total", "_count", "_sum"))}
    assert counted[("herald_messages_published_total", ())] == 2
    assert counted[("herald_deliveries_created_total", ())] == 2
    assert counted[("herald_deliveries_finished_total", (("status", "succeeded"),))] == 1
    assert counted[("herald_deliveries_finished_total", (("status", "dead_lettered"),))] == 1
    assert counted[("herald_attempts_total", (("error_class", ""), ("outcome", "success"),
                                              ("queue", "deliveries")))] == 1
    assert counted[("herald_attempts_total", (("error_class", "http_status"), ("outcome", "permanent_failure"),
                                              ("queue", "deliveries")))] == 1
    assert counted[("herald_attempt_duration_seconds_count", ())] == 2
    assert counted[("herald_publish_to_success_seconds_count", ())] == 1
    assert values[("herald_publish_to_success_seconds_bucket", (("le", "+Inf"),))] == 1
    assert values[("herald_oldest_due_delivery_age_seconds", ())] == 0  # nothing due: no lag
    slots = [key for key in values if key[0] == "herald_send_slots_free"]
    assert slots and all(values[key] > 0 for key in slots)  # the worker reported its slots

    publish(api, topic, "ok")  # to the endpoint the 410 froze: held, so due nowhere and finished never
    again = samples(scrape(client))
    assert again[("herald_messages_published_total", ())] == 3  # a counter: it grows, never resets on a scrape
    assert again[("herald_deliveries_created_total", ())] == 3
    assert all(again[key] >= value for key, value in counted.items())


HISTORY = 20_000


def rows_examined(plan: dict, tables: set[str]) -> int:
    """The rows a plan's scans of `tables` read: those they returned and those their filters removed, per loop."""
    read = 0
    if plan.get("Relation Name") in tables:
        read = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0) +
                plan.get("Rows Removed by Index Recheck", 0)) * plan.get("Actual Loops", 1)
    return read + sum(rows_examined(child, tables) for child in plan.get("Plans", []))


def scrape_reads(client) -> int:
    """The rows of the deliveries', messages' and attempts' tables one scrape's queries read (EXPLAIN ANALYZE)."""
    tables = {model._meta.db_table for model in (Delivery, Message, Attempt)}
    with CaptureQueriesContext(connection) as queries:
        assert scrape(client).status_code == 200
    read = 0
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            if query["sql"].lstrip().upper().startswith("SELECT"):
                cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query['sql']}")
                read += rows_examined(cursor.fetchone()[0][0]["Plan"], tables)
    return read


@pytest.mark.django_db
def test_a_scrape_reads_the_backlog_not_the_finished_history(client, settings, api, user, redis_conn):
    settings.HERALD_METRICS_TOKEN = "s3cret"
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://127.0.0.1:9/hook"},
                       format="json").json()
    subscription = Subscription.objects.select_related("endpoint").get(id=created["id"])
    now, long_ago = timezone.now(), timezone.now() - timedelta(days=2)

    def deliveries(count: int, published_at, **fields) -> None:
        messages = Message.objects.bulk_create([Message(topic_id=topic["id"], payload={}, published_at=published_at)
                                                for _ in range(count)], batch_size=5000)
        Delivery.objects.bulk_create([Delivery(message=message, subscription=subscription, owner=user,
                                               endpoint=subscription.endpoint, **fields) for message in messages],
                                     batch_size=5000)

    deliveries(HISTORY, long_ago, status=DeliveryStatus.SUCCEEDED, delivered_at=long_ago, finished_at=long_ago)
    deliveries(500, long_ago, status=DeliveryStatus.DEAD_LETTERED, finished_at=long_ago,
               dead_letter_reason="max_attempts")
    deliveries(3, now, status=DeliveryStatus.PENDING, next_attempt_at=now - timedelta(seconds=30))  # due: the lag
    deliveries(2, now, status=DeliveryStatus.PENDING, next_attempt_at=None)  # held
    deliveries(1, now, status=DeliveryStatus.DEAD_LETTERED, finished_at=now, dead_letter_reason="max_attempts")
    with connection.cursor() as cursor:  # the planner knows the tables as autovacuum would have shown them
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}, {Message._meta.db_table}")

    backlog = 3 + 2 + 1  # pending and the dead letter of the last five minutes: what the gauges count
    read = scrape_reads(client)
    # Each gauge reads the rows it counts, a few times over (19 here); the 20,500 finished rows and their messages
    # never.
    assert read <= 4 * backlog, read
    values = samples(scrape(client))
    assert values[("herald_deliveries", (("status", "pending"),))] == 5
    assert values[("herald_deliveries_held", ())] == 2
    assert values[("herald_recent_dead_letters", (("reason", "max_attempts"),))] == 1
    assert values[("herald_deliveries_due", (("owner", str(user.id)),))] == 3
    assert 30 <= values[("herald_oldest_due_delivery_age_seconds", ())] < 60

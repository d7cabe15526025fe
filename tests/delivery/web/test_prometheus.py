"""The Prometheus scrape endpoint reads the shared state, so every process's work shows in one scrape."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

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
    assert values[("herald_deliveries", (("status", "succeeded"),))] == 1
    assert values[("herald_deliveries", (("status", "dead_lettered"),))] == 1
    assert values[("herald_dead_letters", (("reason", "permanent_failure"),))] == 1
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

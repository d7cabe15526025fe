"""The Prometheus scrape endpoint reads the shared state, so every process's work shows in one scrape."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import publish, settle, subscribe
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

    values = samples(scrape(client))
    assert values[("herald_deliveries", (("status", "succeeded"),))] == 1
    assert values[("herald_deliveries", (("status", "dead_lettered"),))] == 1
    assert values[("herald_dead_letters", (("reason", "permanent_failure"),))] == 1
    assert values[("herald_endpoints", (("state", "frozen"),))] == 1
    assert values[("herald_recent_attempts_total", (("outcome", "success"),))] == 1
    assert values[("herald_recent_attempts_total", (("outcome", "permanent_failure"),))] == 1
    assert values[("herald_queue_jobs", (("queue", "deliveries"),))] == 0

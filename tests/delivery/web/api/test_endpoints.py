"""The endpoints resource: an endpoint's health and its transitions, and lifting a freeze by hand (the owner's only)."""

import logging

import pytest

from delivery.engine.state import health
from delivery.models import Attempt, Delivery
from subscriptions.models import Endpoint
from tests.conftest import publish, subscribe, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
KEEP_TRYING = {"retrySchedule": {"delays": [0.3], "repeatLast": True}, "retryLimits": {"maxAgeSeconds": 300}}


def test_frozen_endpoint_receives_nothing_until_enabled_through_the_api(api, receiver, processes):
    receiver.script = [Reply(status=410), Reply(status=200)]
    topic, subscription = subscribe(api, receiver, KEEP_TRYING, name="health")
    processes.worker()
    processes.cron()
    publish(api, topic, "gone")
    endpoint_id = subscription["endpoint_id"]
    wait_until(lambda: Endpoint.objects.get(id=endpoint_id).state == "frozen", timeout=20)
    assert Delivery.objects.get().dead_letter_reason == "permanent_failure"

    for n in range(3):
        publish(api, topic, n)
    held = Delivery.objects.filter(status="pending", next_attempt_at__isnull=True)
    wait_until(lambda: held.count() == 3)  # each was claimed by a worker and held, not sent
    assert len(receiver.requests) == 1  # nothing reached the frozen endpoint
    assert Attempt.objects.count() == 1  # holding spends no attempt

    enabled = api.post(f"/api/endpoints/{endpoint_id}/enable/")
    assert enabled.status_code == 200 and enabled.json()["state"] == "active"
    assert enabled.json()["transitions"][0]["reason"] == "enabled by hand"
    assert enabled.json()["transitions"][0]["actor"] == "alice"

    requests = receiver.wait_for(4, timeout=20)
    assert sorted(r.json()["data"] for r in requests[1:]) == [0, 1, 2]
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 3)


def test_enable_is_owner_only(api, other_api, receiver):
    _, subscription = subscribe(api, receiver, None)
    assert other_api.post(f"/api/endpoints/{subscription['endpoint_id']}/enable/").status_code == 404


def test_a_state_change_is_logged_with_whose_endpoint_it_is(api, receiver, caplog, user):
    _, subscription = subscribe(api, receiver, None)
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    with caplog.at_level(logging.INFO, logger="herald.endpoint"):
        health.transition_endpoint(endpoint, "frozen", "410 Gone", actor=user)
    [record] = [r for r in caplog.records if r.name == "herald.endpoint"]
    assert record.herald == {"owner": user.id, "tenant": None, "endpoint": endpoint.id, "endpoint_host": "127.0.0.1",
                             "from": "active", "to": "frozen", "reason": "410 Gone", "actor": user.username}
    assert "to=frozen" in record.getMessage() and "/hook" not in record.getMessage()  # the host only


def test_an_endpoint_is_listed_by_its_health_and_shown_with_its_transitions(api, receiver, user):
    _, subscription = subscribe(api, receiver, None)
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    health.transition_endpoint(endpoint, "frozen", "410 Gone", actor=user)
    fields = ["id", "url", "state", "state_reason", "state_changed_at", "consecutive_failures", "window_attempts",
              "window_failures", "last_success_at", "last_failure_at", "next_probe_at", "created_at"]
    listed = api.get("/api/endpoints/").json()["results"]
    assert [list(row) for row in listed] == [fields]
    assert (listed[0]["url"], listed[0]["state"], listed[0]["state_reason"]) == (receiver.url, "frozen", "410 Gone")
    detail = api.get(f"/api/endpoints/{endpoint.id}/").json()
    assert list(detail) == [*fields, "transitions"]
    assert [{key: row[key] for key in ("from_state", "to_state", "reason", "actor")} for row in detail["transitions"]
            ] == [{"from_state": "active", "to_state": "frozen", "reason": "410 Gone", "actor": "alice"}]
    assert list(detail["transitions"][0]) == ["at", "from_state", "to_state", "reason", "consecutive_failures",
                                              "window_attempts", "window_failures", "actor"]
    assert api.get("/api/endpoints/", {"state": "active"}).json()["count"] == 0

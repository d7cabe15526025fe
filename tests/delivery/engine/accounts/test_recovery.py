"""Dead letters and recovery: redrive, recover, retry now, pause/resume, metrics, retention."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.accounts import recovery
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.scheduler import dispatch, retention
from delivery.models import Attempt, Delivery, Message
from subscriptions.models import Subscription
from tests.conftest import publish, settle, subscribe
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
ONE_SHOT = {"retrySchedule": {"delays": [1]}, "retryLimits": {"maxAttempts": 2}}




def dead_letter_all(api, receiver, run_worker, count=3):
    receiver.script = [Reply(status=500)]
    topic, subscription = subscribe(api, receiver, ONE_SHOT)
    for n in range(count):
        publish(api, topic, n)
    settle()
    assert Delivery.objects.filter(status="dead_lettered").count() == count
    return topic, subscription


def test_dead_letters_list_reasons_and_redrive_with_a_fresh_budget(api, receiver, run_worker):
    topic, subscription = dead_letter_all(api, receiver, run_worker)
    listing = api.get(f"/api/subscriptions/{subscription['id']}/dead-letters/").json()
    assert listing["count"] == 3 and listing["by_reason"] == {"max_attempts": 3}

    receiver.script = [Reply(status=200)]
    redriven = api.post(f"/api/subscriptions/{subscription['id']}/redrive/", {}, format="json")
    assert redriven.status_code == 202 and redriven.json() == {"count": 3}
    settle()

    assert Delivery.objects.filter(status="succeeded").count() == 3
    delivery = Delivery.objects.first()
    assert (delivery.attempt_count, delivery.budget_attempts) == (3, 2)  # attempt numbers go on: 1, 2, then 3
    assert api.get(f"/api/subscriptions/{subscription['id']}/dead-letters/").json()["count"] == 0


def test_redrive_window_selects_by_dead_letter_time(api, receiver, run_worker):
    _, subscription = dead_letter_all(api, receiver, run_worker, count=2)
    old = Delivery.objects.order_by("id").first()
    Delivery.objects.filter(id=old.id).update(finished_at=timezone.now() - timedelta(days=2))
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert api.post(f"/api/subscriptions/{subscription['id']}/redrive/", {"since": since},
                    format="json").json() == {"count": 1}
    assert Delivery.objects.get(id=old.id).status == "dead_lettered"
    bad = api.post(f"/api/subscriptions/{subscription['id']}/redrive/", {"since": since, "until": since},
                   format="json")
    assert bad.status_code == 400 and "until" in bad.json()


def test_redrive_restarts_the_time_to_live(api, receiver, run_worker):
    receiver.script = [Reply(status=500)]
    topic, subscription = subscribe(api, receiver, {"retrySchedule": {"delays": [5]},
                                                "retryLimits": {"maxAgeSeconds": 3}})
    publish(api, topic, 1)
    settle()
    assert Delivery.objects.get().dead_letter_reason == "ttl_expired"
    Message.objects.update(published_at=timezone.now() - timedelta(hours=1))

    receiver.script = [Reply(status=200)]
    api.post(f"/api/subscriptions/{subscription['id']}/redrive/", {}, format="json")
    settle()
    assert Delivery.objects.get().status == "succeeded"


def test_recover_resends_dropped_and_dead_lettered_since_a_time(api, receiver, run_worker):
    receiver.script = [Reply(status=500)]
    topic, subscription = subscribe(api, receiver, {**ONE_SHOT, "redrivePolicy": {"deadLetter": False}})
    for n in range(2):
        publish(api, topic, n)
    settle()
    assert Delivery.objects.filter(status="dropped").count() == 2
    receiver.script = [Reply(status=200)]
    since = (timezone.now() - timedelta(minutes=5)).isoformat()
    assert api.post(f"/api/subscriptions/{subscription['id']}/recover/", {"since": since},
                    format="json").json() == {"count": 2}
    settle()
    assert Delivery.objects.filter(status="succeeded").count() == 2


def test_retry_now_is_a_manual_attempt(api, receiver, run_worker):
    dead_letter_all(api, receiver, run_worker, count=1)
    delivery = Delivery.objects.get()
    receiver.script = [Reply(status=200)]
    response = api.post(f"/api/deliveries/{delivery.id}/retry/")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    run_worker()
    delivery.refresh_from_db()
    assert delivery.status == "succeeded"
    assert Attempt.objects.order_by("-number").first().queue == "manual"
    again = api.post(f"/api/deliveries/{delivery.id}/retry/")
    assert again.status_code == 409 and "succeeded" in again.json()["detail"]


def test_paused_subscription_holds_deliveries_until_resumed(api, receiver, run_worker):
    topic, subscription = subscribe(api, receiver, ONE_SHOT)
    paused = api.post(f"/api/subscriptions/{subscription['id']}/pause/")
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert api.post(f"/api/subscriptions/{subscription['id']}/pause/").status_code == 409
    publish(api, topic, 1)
    run_worker()
    dispatch.dispatch_due()
    run_worker()
    assert receiver.requests == [] and Delivery.objects.get().next_attempt_at is None

    assert api.post(f"/api/subscriptions/{subscription['id']}/resume/").json()["status"] == "confirmed"
    settle()
    assert len(receiver.wait_for(1)) == 1
    assert Delivery.objects.get().status == "succeeded"


def test_paused_deliveries_keep_their_time_to_live(api, receiver, run_worker):
    topic, subscription = subscribe(api, receiver, {"retrySchedule": {"delays": [1]},
                                                    "retryLimits": {"maxAgeSeconds": 1}})
    api.post(f"/api/subscriptions/{subscription['id']}/pause/")
    publish(api, topic, 1)
    Message.objects.update(published_at=timezone.now() - timedelta(seconds=2))
    assert dispatch.expire_held() == 1
    assert Delivery.objects.get().dead_letter_reason == "ttl_expired"


def test_metrics_per_subscription_and_topic(api, receiver, run_worker):
    receiver.script = lambda request: Reply(status=500 if request.json()["data"] == 0 else 200)
    topic, subscription = subscribe(api, receiver, {"retrySchedule": {"delays": [0.2]},
                                                    "retryLimits": {"maxAttempts": 2}})
    for n in range(4):
        publish(api, topic, n)
    settle()

    body = api.get(f"/api/subscriptions/{subscription['id']}/metrics/?window=1h").json()
    assert body["window_seconds"] == 3600
    assert (body["published"], body["matched"], body["succeeded"], body["dead_lettered"]) == (4, 4, 3, 1)
    assert (body["attempts"], body["failed_attempts"]) == (5, 2)
    latency = body["latency_ms"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    assert api.get(f"/api/topics/{topic['id']}/metrics/?window=7d").json()["matched"] == 4
    bad = api.get(f"/api/subscriptions/{subscription['id']}/metrics/?window=soon")
    assert bad.status_code == 400 and "window" in bad.json()


def test_retention_purges_old_terminal_rows_in_batches(api, receiver, run_worker, settings, monkeypatch):
    monkeypatch.setattr(retention, "BATCH", 2)
    topic, _ = subscribe(api, receiver, ONE_SHOT)
    for n in range(5):
        publish(api, topic, n)
    settle()
    publish(api, topic, "fresh")
    long_ago = timezone.now() - timedelta(days=31)
    Delivery.objects.filter(status="succeeded").update(finished_at=long_ago)
    Attempt.objects.update(started_at=long_ago)
    Message.objects.exclude(payload="fresh").update(published_at=long_ago)

    assert retention.purge() == {"attempts": 5, "deliveries": 5, "messages": 5, "exchanges": 0}
    assert Message.objects.get().payload == "fresh" and Delivery.objects.get().status == "pending"


def test_a_redrive_window_is_checked_by_the_service_for_every_door(api, receiver):
    topic, subscription = subscribe(api, receiver)
    later, earlier = timezone.now(), timezone.now() - timedelta(hours=1)
    with pytest.raises(ApplicationError) as refused:
        recovery.subscription_redrive(subscription=Subscription.objects.get(id=subscription["id"]), since=later,
                                      until=earlier)
    assert refused.value.field == "until"
    answer = api.post(f"/api/subscriptions/{subscription['id']}/redrive/",
                      {"since": later.isoformat(), "until": earlier.isoformat()}, format="json")
    assert answer.status_code == 400 and answer.json() == {"until": ["must be later than since"]}

"""Retention (engine/scheduler/retention.py): what is past its time goes, in batches, and nothing else. On
PostgreSQL a statement per batch; the ORM's way (SQLite) purges the same rows. Time is passed in."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.scheduler import retention
from delivery.models import Attempt, Delivery, Exchange, Message
from subscriptions.models import Endpoint, Subscription, Topic

pytestmark = pytest.mark.django_db(transaction=True)
NOW = timezone.now()
OLD = NOW - timedelta(days=40)


def history(user, topic_name: str, retention_days: int | None) -> dict:
    """A topic's messages: an old finished one (its attempt old, the other young), an old one still being sent, a
    fresh finished one, and an old message no subscription got (no delivery); a batch exchange kept by an attempt
    that stays and one whose attempts are gone."""
    topic = Topic.objects.create(owner=user, name=topic_name, message_retention_days=retention_days)
    endpoint = Endpoint.objects.create(owner=user, url=f"http://127.0.0.1:9/{topic_name}")
    subscription = Subscription.objects.create(topic=topic, endpoint=endpoint, secret="whsec_" + "a" * 32)

    def message(published_at) -> Message:
        return Message.objects.create(id=uuid.uuid4(), topic=topic, payload={}, published_at=published_at,
                                      fanout_skipped={})

    def delivery(of: Message, status: str, finished_at) -> Delivery:
        return Delivery.objects.create(message=of, subscription=subscription, endpoint=endpoint, owner=user,
                                       status=status, finished_at=finished_at)

    def attempt(of: Delivery, started_at, exchange=None) -> Attempt:
        return Attempt.objects.create(delivery=of, number=of.attempts.count() + 1, queue="deliveries",
                                      started_at=started_at, duration_ms=1, request_url=endpoint.url,
                                      outcome="succeeded", exchange=exchange)

    kept_exchange, orphan_exchange = Exchange.objects.create(), Exchange.objects.create()
    old_done = delivery(message(OLD), "succeeded", OLD)
    attempt(old_done, OLD, orphan_exchange)
    attempt(old_done, NOW - timedelta(hours=1))
    sending = delivery(message(OLD), "pending", None)
    attempt(sending, OLD)
    fresh = delivery(message(NOW - timedelta(hours=1)), "succeeded", NOW - timedelta(hours=1))
    attempt(fresh, NOW - timedelta(hours=1), kept_exchange)
    unsent = message(OLD)
    return {"old_done": old_done, "sending": sending, "fresh": fresh, "unsent": unsent,
            "kept_exchange": kept_exchange, "orphan_exchange": orphan_exchange}


def left() -> tuple:
    return (sorted(map(str, Message.objects.values_list("id", flat=True))),
            sorted(Delivery.objects.values_list("id", flat=True)),
            sorted(Attempt.objects.values_list("delivery_id", "number")),
            sorted(Exchange.objects.values_list("id", flat=True)))


@pytest.mark.parametrize("purging", [retention.purge, retention._purge_through_the_orm])
def test_what_is_past_its_time_goes_and_nothing_else(django_user_model, settings, monkeypatch, purging):
    settings.HERALD_ATTEMPT_RETENTION_DAYS, settings.HERALD_MESSAGE_RETENTION_DAYS = 30, 30
    monkeypatch.setattr(retention, "BATCH", 2)  # several batches of each
    user = django_user_model.objects.create_user("alice")
    default, week, long = (history(user, "default", None), history(user, "week", 7),
                           history(user, "long", 60))  # 40 days old is within the long topic's 60
    # every topic's two old attempts; the old finished deliveries of two topics (their young attempts with them),
    # their messages and the two old messages nobody got; the exchanges whose attempts are gone
    assert purging(NOW) == {"attempts": 6, "deliveries": 2, "messages": 4, "exchanges": 3}
    for gone in (default, week):
        assert not Delivery.objects.filter(id=gone["old_done"].id).exists()  # with its young attempt
        assert not Message.objects.filter(id=gone["unsent"].id).exists()
    assert Delivery.objects.filter(id=long["old_done"].id).exists()
    assert not Attempt.objects.filter(started_at__lt=NOW - timedelta(days=30)).exists()  # every topic's
    for kept in (default, week, long):
        assert Delivery.objects.filter(id__in=[kept["sending"].id, kept["fresh"].id]).count() == 2
        assert Message.objects.filter(id=kept["sending"].message_id).exists()  # unfinished: kept
        assert Exchange.objects.filter(id=kept["kept_exchange"].id).exists()
        assert not Exchange.objects.filter(id=kept["orphan_exchange"].id).exists()
    assert purging(NOW) == {"attempts": 0, "deliveries": 0, "messages": 0, "exchanges": 0}

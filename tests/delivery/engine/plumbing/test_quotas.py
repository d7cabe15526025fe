"""Per-owner quotas (delivery/engine/plumbing/quotas.py) through the API: one owner's subscriptions, replays and resent
confirmations are bounded, each refusal names its setting, the time-bound ones say when to try again (429 with
Retry-After), and another owner is not affected. Time is passed in where the quota counts it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.accounts import confirmation
from delivery.engine.plumbing import quotas
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Replay
from subscriptions.models import Subscription

pytestmark = pytest.mark.django_db(transaction=True)


def topic_of(api, name="q"):
    return api.post("/api/topics/", {"name": name}, format="json").json()


def test_subscriptions_per_owner(api, other_api, settings):
    settings.HERALD_MAX_SUBSCRIPTIONS_PER_OWNER = 2
    topic = topic_of(api)
    for n in range(2):
        assert api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": f"https://example.com/{n}"},
                        format="json").status_code == 201
    again = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/0"},
                     format="json")
    assert again.status_code == 200  # the same subscription again is not a new one
    refused = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/2"},
                       format="json")
    assert refused.status_code == 400 and "HERALD_MAX_SUBSCRIPTIONS_PER_OWNER" in refused.json()["detail"]
    assert Subscription.objects.count() == 2
    other = topic_of(other_api)
    assert other_api.post("/api/subscriptions/", {"topic": other["id"], "endpoint": "https://example.com/2"},
                          format="json").status_code == 201  # another owner's own allowance


def test_replays_per_hour(api, settings):
    settings.HERALD_MAX_REPLAYS_PER_HOUR = 1
    topic = topic_of(api)
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/r"},
                            format="json").json()
    url = f"/api/subscriptions/{subscription['id']}/replay/"
    since = (timezone.now() - timedelta(minutes=5)).isoformat()
    assert api.post(url, {"since": since}, format="json").status_code in (200, 201, 202)
    refused = api.post(url, {"since": since}, format="json")
    assert refused.status_code == 429 and "HERALD_MAX_REPLAYS_PER_HOUR" in refused.json()["detail"]
    assert 3500 <= int(refused["Retry-After"]) <= 3601
    assert Replay.objects.count() == 1
    quotas.replay(Subscription.objects.get(), timezone.now() + timedelta(hours=1, seconds=1))  # an hour on: allowed


def test_replays_per_subscription_per_hour(api, settings):
    settings.HERALD_MAX_REPLAYS_PER_SUBSCRIPTION_PER_HOUR = 2
    topic = topic_of(api)
    first, second = (api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": f"https://example.com/{n}"},
                              format="json").json() for n in range(2))
    since = (timezone.now() - timedelta(minutes=5)).isoformat()
    for _ in range(2):
        assert api.post(f"/api/subscriptions/{first['id']}/replay/", {"since": since}, format="json").status_code < 300
    refused = api.post(f"/api/subscriptions/{first['id']}/replay/", {"since": since}, format="json")
    assert refused.status_code == 429 and "HERALD_MAX_REPLAYS_PER_SUBSCRIPTION_PER_HOUR" in refused.json()["detail"]
    assert int(refused["Retry-After"]) > 3500
    assert api.post(f"/api/subscriptions/{second['id']}/replay/", {"since": since}, format="json").status_code < 300


def test_resent_confirmations(api, settings, redis_conn):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    settings.HERALD_MAX_RESENDS_PER_HOUR = 2
    topic = topic_of(api)
    ids = [api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": f"https://example.com/c{n}"},
                    format="json").json()["id"] for n in range(3)]
    first = api.post(f"/api/subscriptions/{ids[0]}/resend-confirmation/")
    assert first.status_code == 202
    soon = api.post(f"/api/subscriptions/{ids[0]}/resend-confirmation/")
    assert soon.status_code == 429 and "HERALD_RESEND_INTERVAL_SECONDS" in soon.json()["detail"]
    assert 1 <= int(soon["Retry-After"]) <= 60
    assert api.post(f"/api/subscriptions/{ids[1]}/resend-confirmation/").status_code == 202
    third = api.post(f"/api/subscriptions/{ids[2]}/resend-confirmation/")
    assert third.status_code == 429 and "HERALD_MAX_RESENDS_PER_HOUR" in third.json()["detail"]
    later = timezone.now() + timedelta(hours=1)  # the next clock hour: its own allowance
    confirmation.confirmation_resend(subscription=Subscription.objects.get(id=ids[2]), now=later)
    with pytest.raises(ApplicationError, match="already confirmed"):
        Subscription.objects.filter(id=ids[2]).update(status="confirmed")
        confirmation.confirmation_resend(subscription=Subscription.objects.get(id=ids[2]), now=later)

"""Per-owner quotas (delivery/engine/accounts/quotas.py) through the API: one owner's subscriptions, replays and resent
confirmations are bounded, each refusal names its setting, the time-bound ones say when to try again (429 with
Retry-After), and another owner is not affected. Time is passed in where the quota counts it."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from delivery.engine.accounts import confirmation, quotas
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Replay
from subscriptions.models import Endpoint, Subscription
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db(transaction=True)
shop = shop_fixture  # the tenants' fixture, shared


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


def move(client, subscription_id: int, url: str):
    return client.patch(f"/api/subscriptions/{subscription_id}/", {"endpoint": url}, format="json")


def refused_for(response, setting: str) -> bool:
    detail = response.json().get("detail", "")
    return response.status_code == 429 and setting in detail and 1 <= int(response["Retry-After"]) <= 3600


def test_handshakes_per_owner_count_every_new_url_and_nothing_else(api, other_api, settings, redis_conn):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    settings.HERALD_MAX_HANDSHAKES_PER_HOUR = 3
    topic = topic_of(api)
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/h0"},
                       format="json").json()  # 1
    for n in (1, 2):  # 2, 3
        assert move(api, created["id"], f"https://example.com/h{n}").status_code == 200
    refused = move(api, created["id"], "https://example.com/h3")
    assert refused_for(refused, "HERALD_MAX_HANDSHAKES_PER_HOUR"), refused.content
    stored = Subscription.objects.select_related("endpoint").get(id=created["id"])
    assert stored.endpoint.url == "https://example.com/h2"  # nothing was changed
    assert not Endpoint.objects.filter(url="https://example.com/h3").exists()
    again = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/h2"},
                     format="json")
    assert again.status_code == 200  # the subscription it has: no handshake, nothing counted
    assert refused_for(api.post(f"/api/subscriptions/{created['id']}/resend-confirmation/"),
                       "HERALD_MAX_HANDSHAKES_PER_HOUR")
    settings.HERALD_MAX_HANDSHAKES_PER_HOUR = 4  # the refused resend counted for nothing, its interval neither
    assert api.post(f"/api/subscriptions/{created['id']}/resend-confirmation/").status_code == 202  # 4
    assert api.delete(f"/api/subscriptions/{created['id']}/").status_code == 204
    recreated = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/h2"},
                         format="json")  # a delete and a create is a new handshake like any other
    assert refused_for(recreated, "HERALD_MAX_HANDSHAKES_PER_HOUR") and not Subscription.objects.exists()
    other = topic_of(other_api)
    assert other_api.post("/api/subscriptions/", {"topic": other["id"], "endpoint": "https://example.com/h3"},
                          format="json").status_code == 201  # another owner's own allowance


def test_handshakes_per_tenant_and_the_owners_allowance_its_tenants_share(shop, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    settings.HERALD_MAX_HANDSHAKES_PER_TENANT_PER_HOUR = 2
    settings.HERALD_MAX_HANDSHAKES_PER_HOUR = 3
    acme, globex = shop["acme"]["client"], shop["globex"]["client"]
    mine, theirs = shop["acme"]["subscription"]["id"], shop["globex"]["subscription"]["id"]
    for n in (1, 2):
        assert move(acme, mine, f"http://127.0.0.1:9/acme-{n}").status_code == 200
    refused = move(acme, mine, "http://127.0.0.1:9/acme-3")
    assert refused_for(refused, "HERALD_MAX_HANDSHAKES_PER_TENANT_PER_HOUR"), refused.content
    assert Subscription.objects.get(id=mine).endpoint.url == "http://127.0.0.1:9/acme-2"
    assert acme.delete(f"/api/subscriptions/{mine}/").status_code == 204
    recreated = acme.post("/api/subscriptions/", {"topic": shop["orders"]["id"],
                                                  "endpoint": "http://127.0.0.1:9/acme-2"}, format="json")
    assert refused_for(recreated, "HERALD_MAX_HANDSHAKES_PER_TENANT_PER_HOUR")
    assert not Subscription.objects.filter(tenant__external_id="acme").exists()

    # Another tenant has an allowance of its own, within what is left of the owner's (3 - acme's 2).
    assert move(globex, theirs, "http://127.0.0.1:9/globex-1").status_code == 200
    refused = move(globex, theirs, "http://127.0.0.1:9/globex-2")
    assert refused_for(refused, "HERALD_MAX_HANDSHAKES_PER_HOUR"), refused.content
    own = shop["own"][0]["id"]
    assert refused_for(move(shop["api"], own, "http://127.0.0.1:9/own-2"), "HERALD_MAX_HANDSHAKES_PER_HOUR")


def test_the_handshake_allowance_is_the_clock_hours(api, settings, redis_conn):
    settings.HERALD_MAX_HANDSHAKES_PER_HOUR = 1
    topic = topic_of(api)
    subscription = Subscription.objects.get(id=api.post(
        "/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/c"}, format="json").json()["id"])
    before_the_hour = datetime(2026, 11, 28, 9, 59, 0, tzinfo=UTC)
    quotas.handshake(subscription, before_the_hour)
    with pytest.raises(ApplicationError, match="HERALD_MAX_HANDSHAKES_PER_HOUR") as refused:
        quotas.handshake(subscription, before_the_hour + timedelta(seconds=30))
    assert (refused.value.status_code, refused.value.retry_after) == (429, 30)
    quotas.handshake(subscription, datetime(2026, 11, 28, 10, 0, 0, tzinfo=UTC))  # the next hour's own allowance


def test_a_resends_count_keeps_its_redis_key_across_releases():
    """Counts already in Redis go on counting after an upgrade: the key's text is the one earlier releases wrote
    (the owner's own subscriptions tenant 0, a tenant's its id, the clock hour since the epoch)."""
    at = datetime(2026, 11, 28, 10, 30, tzinfo=UTC)
    own = SimpleNamespace(topic=SimpleNamespace(owner_id=7), tenant_id=None)
    tenants = SimpleNamespace(topic=SimpleNamespace(owner_id=7), tenant_id=12)
    assert quotas._resend_key(own, at) == "herald:quota:resend:owner:7:0:498850"
    assert quotas._resend_key(tenants, at) == "herald:quota:resend:owner:7:12:498850"

"""The publish rate (delivery/web/api/throttling.py): a fixed window per user counted in Redis, a batch counting its
entries; the rate from REST_FRAMEWORK's DEFAULT_THROTTLE_RATES["publish"] where a project sets it, else
HERALD_PUBLISH_RATE; past it a 429 with the seconds left in the window as Retry-After. Transformation test-runs and
event version previews are counted the same way, each apart, per user and per tenant."""

from types import SimpleNamespace

import pytest

from delivery.engine.accounts import tenancy
from delivery.models import Message
from delivery.web.api import throttling
from tests.delivery.web.api.calls import create_topic
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared
NOW = 1_800_000_030.25  # 30.25 s into a minute's window


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    """The throttle's clock, fixed: its window and the seconds left in it are known."""
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: NOW))


def counted(redis_conn, user) -> tuple[int, int]:
    """(what this minute's window counts for `user`, the seconds its key has left)."""
    key = throttling.KEY.format(user=user.pk, window=int(NOW // 60))
    return int(redis_conn.get(key) or 0), redis_conn.ttl(key)


def test_the_herald_rate_limits_publishes_per_window_and_says_when_to_come_back(api, user, redis_conn, settings):
    settings.HERALD_PUBLISH_RATE = "2/min"
    url = f"/api/topics/{create_topic(api)['id']}/publish/"
    assert [api.post(url, {"payload": n}, format="json").status_code for n in range(2)] == [202, 202]
    limited = api.post(url, {"payload": 3}, format="json")
    assert (limited.status_code, limited["Retry-After"]) == (429, "30")  # 29.75 s left, rounded up
    assert limited.json() == {"detail": "Request was throttled. Expected available in 30 seconds."}
    assert Message.objects.count() == 2
    assert counted(redis_conn, user) == (3, 61)  # the refused one counts too; the key outlives its window


def test_a_batch_counts_its_entries_and_a_body_without_a_list_counts_one(api, user, redis_conn, settings):
    settings.HERALD_PUBLISH_RATE = "100/min"
    url = f"/api/topics/{create_topic(api)['id']}/publish-batch/"
    entries = [{"id": str(n), "payload": n} for n in range(3)]
    assert api.post(url, {"entries": entries}, format="json").status_code == 200
    assert counted(redis_conn, user)[0] == 3
    assert api.post(url, {"entries": "three"}, format="json").status_code == 400
    assert api.post(url, {"entries": []}, format="json").status_code == 400
    assert counted(redis_conn, user)[0] == 5
    api.get("/api/topics/")
    assert counted(redis_conn, user)[0] == 5  # only publishing is counted


def test_a_projects_drf_rate_for_publish_comes_first(api, redis_conn, settings):
    settings.HERALD_PUBLISH_RATE = "100/min"
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"publish": "1/hour"}}
    url = f"/api/topics/{create_topic(api)['id']}/publish/"
    assert api.post(url, {"payload": 1}, format="json").status_code == 202
    limited = api.post(url, {"payload": 2}, format="json")
    assert (limited.status_code, limited["Retry-After"]) == (429, "3570")  # the hour's window: 3569.75 s left


def test_transformation_test_runs_are_limited_per_user_and_per_tenant_apart_from_publishes(shop, user, redis_conn,
                                                                                          settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"transformation_test": "2/min"}}
    tenancy.portal_update(owner=user, allow_transformations=True)
    body = {"code": "function handler(webhook) { return webhook; }", "payload": {"id": 1}}
    own = f"/api/subscriptions/{shop['own'][0]['id']}/transformation/test/"
    assert [shop["api"].post(own, body, format="json").status_code for _ in range(3)] == [200, 200, 429]
    acme = f"/api/subscriptions/{shop['acme']['subscription']['id']}/transformation/test/"
    assert shop["acme"]["client"].post(acme, body, format="json").status_code == 200  # a tenant's count is its own
    assert counted(redis_conn, user) == (0, -2)  # publishes are counted apart
    key = throttling.TRANSFORMATION_TEST_KEY.format(user=user.pk, window=int(NOW // 60))
    assert int(redis_conn.get(key)) == 3
    assert throttling.TransformationTestThrottle().default_rate() == "60/min"


def test_event_version_previews_are_limited_per_user_and_per_tenant_apart_from_test_runs(shop, user, redis_conn,
                                                                                         settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"event_version_preview": "1/min"}}
    body = {"event_version": "2030-01-01"}  # refused (400) after it is counted: counting comes first
    own = f"/api/subscriptions/{shop['own'][0]['id']}/event-version/preview/"
    assert [shop["api"].post(own, body, format="json").status_code for _ in range(2)] == [400, 429]
    acme = f"/api/subscriptions/{shop['acme']['subscription']['id']}/event-version/preview/"
    assert shop["acme"]["client"].post(acme, body, format="json").status_code == 400  # a tenant's count is its own
    key = throttling.EVENT_VERSION_PREVIEW_KEY.format(user=user.pk, window=int(NOW // 60))
    assert int(redis_conn.get(key)) == 2
    assert redis_conn.get(throttling.TRANSFORMATION_TEST_KEY.format(user=user.pk, window=int(NOW // 60))) is None
    assert throttling.EventVersionPreviewThrottle().default_rate() == "60/min"

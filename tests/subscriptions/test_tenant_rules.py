"""Tenants' rules and quotas, held by the services every door calls (the API, the portal, the admin, Python): an
endpoint quota that a changed URL cannot step around, a tenant that cannot be half-deleted, a closed topic that
answers as a missing one, and a catalog whose changes do not strand the tenants' choices."""

import pytest
from django.test import override_settings

from delivery.engine import subscribing, tenancy
from delivery.engine.errors import ApplicationError
from subscriptions.models import Endpoint, Subscription, Tenant
from tests.subscriptions.test_tenants import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared


def in_use(tenant_name: str) -> int:
    return Endpoint.objects.filter(tenant__external_id=tenant_name, subscriptions__isnull=False).distinct().count()


@override_settings(HERALD_MAX_ENDPOINTS_PER_TENANT=1)
def test_a_move_that_frees_its_old_endpoint_keeps_the_count_and_is_allowed_at_the_quota(shop):
    acme, first = shop["acme"]["client"], shop["acme"]["subscription"]["id"]
    moved = acme.patch(f"/api/subscriptions/{first}/", {"endpoint": "http://127.0.0.1:9/acme-moved"}, format="json")
    assert moved.status_code == 200, moved.content
    assert in_use("acme") == 1


@override_settings(HERALD_MAX_ENDPOINTS_PER_TENANT=1)
def test_a_second_subscription_moving_off_a_shared_endpoint_is_refused_everywhere(shop, client, user):
    acme = Tenant.objects.get(external_id="acme")
    other_topic, _ = subscribing.topic_create(owner=user, name="invoices", open_to_tenants=True)
    second, _ = subscribing.subscription_create(topic=other_topic, endpoint="http://127.0.0.1:9/acme", tenant=acme)
    assert in_use("acme") == 1

    api = shop["acme"]["client"].patch(f"/api/subscriptions/{second.id}/", {"endpoint": "http://127.0.0.1:9/b"},
                                       format="json")
    assert api.status_code == 400 and "HERALD_MAX_ENDPOINTS_PER_TENANT" in api.json()["endpoint"][0], api.content
    portal = client.post(f"{tenancy.portal_link(acme)}endpoints/{second.id}/move/", {"url": "http://127.0.0.1:9/c"})
    assert portal.status_code == 400 and "HERALD_MAX_ENDPOINTS_PER_TENANT" in portal.content.decode()
    with pytest.raises(ApplicationError, match="HERALD_MAX_ENDPOINTS_PER_TENANT") as refused:
        subscribing.subscription_update(subscription=second, endpoint="http://127.0.0.1:9/d")
    assert refused.value.field == "endpoint"
    assert in_use("acme") == 1 and Subscription.objects.get(id=second.id).endpoint.url == "http://127.0.0.1:9/acme"
    assert not Endpoint.objects.filter(tenant=acme, url__in=["http://127.0.0.1:9/b", "http://127.0.0.1:9/c",
                                                             "http://127.0.0.1:9/d"]).exists()

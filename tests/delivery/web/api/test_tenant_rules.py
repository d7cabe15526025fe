"""Tenants' rules and quotas, held by the services every door calls (the API, the portal, the admin, Python): an
endpoint quota that a changed URL cannot step around, a tenant that cannot be half-deleted, a closed topic that
answers as a missing one, and a catalog whose changes do not strand the tenants' choices."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from delivery.engine.accounts import subscribing, tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.events import publish
from delivery.models import Delivery
from subscriptions.models import Endpoint, Subscription, Tenant, TenantKey
from tests.delivery.web.api.shop import shop as shop_fixture

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
    portal = client.post(f"{tenancy.portal_link(acme)}subscriptions/{second.id}/move/", {"url": "http://127.0.0.1:9/c"})
    assert portal.status_code == 400 and "HERALD_MAX_ENDPOINTS_PER_TENANT" in portal.content.decode()
    with pytest.raises(ApplicationError, match="HERALD_MAX_ENDPOINTS_PER_TENANT") as refused:
        subscribing.subscription_update(subscription=second, endpoint="http://127.0.0.1:9/d")
    assert refused.value.field == "endpoint"
    assert in_use("acme") == 1 and Subscription.objects.get(id=second.id).endpoint.url == "http://127.0.0.1:9/acme"
    assert not Endpoint.objects.filter(tenant=acme, url__in=["http://127.0.0.1:9/b", "http://127.0.0.1:9/c",
                                                             "http://127.0.0.1:9/d"]).exists()


def test_deleting_a_tenant_while_its_deliveries_are_in_flight_is_a_409_and_changes_nothing(shop, user):
    publish("orders", {"n": 1}, owner=user, tenant="acme")
    mine = Delivery.objects.filter(tenant__external_id="acme")
    mine.update(status="in_flight", lease_until=timezone.now() + timedelta(minutes=1))
    tenant_id = shop["acme"]["tenant"]["id"]
    response = shop["api"].delete(f"/api/tenants/{tenant_id}/")
    assert response.status_code == 409, response.content
    assert "in flight" in response.json()["detail"] and "1 delivery" in response.json()["detail"]
    assert Tenant.objects.filter(id=tenant_id).exists() and mine.count() == 1
    assert TenantKey.objects.filter(tenant_id=tenant_id).exists()
    assert Subscription.objects.filter(tenant_id=tenant_id).count() == 1

    mine.update(lease_until=timezone.now() - timedelta(seconds=1))  # its worker is gone: nothing to wait for
    assert shop["api"].delete(f"/api/tenants/{tenant_id}/").status_code == 204
    assert not Tenant.objects.filter(id=tenant_id).exists() and not Delivery.objects.filter(tenant_id=tenant_id)


def test_a_closed_topic_named_by_a_tenant_answers_as_a_topic_that_does_not_exist(shop):
    acme = shop["acme"]["client"]

    def subscribing_to(topic):
        response = acme.post("/api/subscriptions/", {"topic": topic, "endpoint": "http://127.0.0.1:9/z"},
                             format="json")
        assert response.status_code == 400, response.content
        return response.json()["topic"][0]

    closed_id = shop["internal"]["id"]
    assert subscribing_to("internal") == subscribing_to("nothing-here").replace("nothing-here", "internal")
    assert str(closed_id) not in subscribing_to("internal")
    missing_id = closed_id + 1000
    assert subscribing_to(closed_id) == subscribing_to(missing_id).replace(str(missing_id), str(closed_id))


@pytest.mark.parametrize("ttl", [10**20, 0, 7 * 86_400 + 1, -5])
def test_a_portal_link_ttl_out_of_range_is_a_400_naming_ttl_seconds_and_the_range(shop, ttl):
    response = shop["api"].post(f"/api/tenants/{shop['acme']['tenant']['id']}/portal-link/", {"ttl_seconds": ttl},
                                format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["ttl_seconds"]
    assert "between 1 and 604800 seconds" in response.json()["ttl_seconds"][0]


def test_the_admin_shows_a_refused_tenant_delete_and_deletes_nothing(shop, user, admin_client):
    publish("orders", {"n": 1}, owner=user, tenant="acme")
    Delivery.objects.update(status="in_flight", lease_until=timezone.now() + timedelta(minutes=1))
    tenant_id = shop["acme"]["tenant"]["id"]
    page = admin_client.post(f"/admin/herald_subscriptions/tenant/{tenant_id}/delete/", {"post": "yes"}, follow=True)
    assert page.status_code == 200 and "in flight" in page.content.decode()
    listed = admin_client.post("/admin/herald_subscriptions/tenant/", {
        "action": "delete_selected", "_selected_action": [tenant_id], "post": "yes"}, follow=True)
    assert listed.status_code == 200 and "in flight" in listed.content.decode()
    assert Tenant.objects.filter(id=tenant_id).exists() and Delivery.objects.filter(tenant_id=tenant_id).exists()
    Delivery.objects.update(status="succeeded", lease_until=None)
    deleted = admin_client.post(f"/admin/herald_subscriptions/tenant/{tenant_id}/delete/", {"post": "yes"})
    assert deleted.status_code == 302 and not Tenant.objects.filter(id=tenant_id).exists()

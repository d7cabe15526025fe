"""The admin console as a whole: every page renders, lists and searches included. Each page's own behaviour is
tested beside its module, in tests/delivery/web/console/test_<module>.py."""

import pytest

from delivery.engine.accounts import tenancy
from delivery.models import Attempt, Delivery
from subscriptions.models import EventType, Portal

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_page_renders(admin_client, traffic, user):
    topic, subscription = traffic
    delivery = Delivery.objects.get(status="dead_lettered")
    attempt = Attempt.objects.filter(delivery=delivery).first()
    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    key, _ = tenancy.tenant_key_create(tenant=tenant, name="ci")
    event_type = EventType.objects.create(owner=user, name="order.created")
    portal = Portal.objects.create(owner=user, name="Shop")
    pages = ["/admin/", "/dashboard/", "/dashboard/?span=1h"]
    for model in ["herald_subscriptions/topic", "herald_subscriptions/subscription", "herald_subscriptions/endpoint",
                  "herald_delivery/message", "herald_delivery/delivery", "herald_delivery/attempt",
                  "herald_subscriptions/tenant", "herald_subscriptions/tenantkey", "herald_subscriptions/eventtype",
                  "herald_subscriptions/portal"]:
        pages += [f"/admin/{model}/", f"/admin/{model}/?q=console"]
    pages += [f"/admin/herald_subscriptions/topic/{topic['id']}/change/",
              f"/admin/herald_subscriptions/subscription/{subscription['id']}/change/",
              f"/admin/herald_subscriptions/endpoint/{subscription['endpoint_id']}/change/",
              f"/admin/herald_delivery/delivery/{delivery.id}/change/",
              f"/admin/herald_delivery/attempt/{attempt.id}/change/",
              f"/admin/herald_subscriptions/tenant/{tenant.id}/change/",
              f"/admin/herald_subscriptions/tenantkey/{key.id}/change/",
              f"/admin/herald_subscriptions/eventtype/{event_type.id}/change/",
              f"/admin/herald_subscriptions/portal/{portal.id}/change/",
              "/admin/herald_subscriptions/topic/add/", "/admin/herald_subscriptions/tenant/add/",
              "/admin/herald_subscriptions/eventtype/add/", "/admin/herald_subscriptions/portal/add/",
              "/admin/herald_delivery/delivery/?status__exact=dead_lettered",
              "/admin/herald_delivery/attempt/?outcome__exact=success"]
    for page in pages:
        assert admin_client.get(page).status_code == 200, page

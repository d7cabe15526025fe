"""Every figure a tenant can read counts only its own traffic (messages published for it, or for every tenant),
read beside another tenant's heavier traffic on the same topic: the API with its key, the portal with its link."""

import pytest

from delivery.engine.accounts import tenancy
from delivery.events import publish
from delivery.models import Delivery
from subscriptions.models import Tenant
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture


def test_every_figure_a_tenant_reads_is_its_own(shop, client):
    owner = Tenant.objects.get(external_id="acme").owner
    for n in range(7):
        publish("orders", {"n": n}, owner=owner, tenant="globex")  # the other tenant's traffic
    for n in range(2):
        publish("orders", {"n": n}, owner=owner, tenant="acme")
    publish("orders", {"n": 9}, owner=owner, broadcast=True)
    acme, sub = shop["acme"]["client"], shop["acme"]["subscription"]["id"]
    mine = Delivery.objects.filter(subscription_id=sub).count()
    assert mine == 3

    metrics = acme.get(f"/api/subscriptions/{sub}/metrics/").json()
    assert (metrics["published"], metrics["matched"]) == (3, 3)
    assert acme.get("/api/deliveries/").json()["count"] == mine
    assert acme.get(f"/api/deliveries/?subscription={sub}").json()["count"] == mine
    assert acme.get("/api/subscriptions/").json()["count"] == 1
    endpoint = acme.get(f"/api/endpoints/{shop['acme']['subscription']['endpoint_id']}/").json()
    assert endpoint["consecutive_failures"] == 0
    for closed in ("/api/messages/", f"/api/topics/{shop['orders']['id']}/metrics/"):
        assert acme.get(closed).status_code in (403, 404), closed  # figures over everyone's traffic: not a tenant's

    link = tenancy.portal_link(Tenant.objects.get(external_id="acme"))
    page = client.get(f"{link}subscriptions/{sub}/").content.decode()
    globex = shop["globex"]["subscription"]["id"]
    globex_ids = {str(d.message_id) for d in Delivery.objects.filter(subscription_id=globex)}
    assert not any(message_id in page for message_id in globex_ids)
    home = client.get(link).content.decode()
    assert "globex" not in home.lower()

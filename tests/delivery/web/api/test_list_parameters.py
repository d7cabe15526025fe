"""Lists take the parameters they document and refuse the others (400 naming them), as a body refuses an unknown
field: `?tenant=globex` where a list has no tenant filter listed everything. Owners filter by tenant where objects
have one, and name a tenant by its external id in paths."""

import pytest
from django.test import override_settings
from django.urls import reverse

from delivery.events import publish
from delivery.urls import router
from subscriptions.models import Tenant
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture
LISTS = [basename for _, _, basename in router.registry]  # every list the API has, a new one included


@pytest.mark.parametrize("basename", LISTS)
def test_every_list_refuses_a_parameter_it_does_not_take(api, basename):
    url = reverse(f"herald:{basename}-list")
    refused = api.get(url, {"limit": 5, "no_such_filter": "x"})
    assert refused.status_code == 400 and "no_such_filter" in refused.json(), (basename, refused.content)
    assert "is not a parameter of this list; it takes" in refused.json()["no_such_filter"][0]
    assert api.get(url, {"limit": 5, "offset": 0}).status_code == 200


def test_owners_filter_deliveries_messages_and_subscriptions_by_tenant(shop, user):
    api = shop["api"]
    for tenant in ("acme", "globex", "globex"):
        publish("orders", {"for": tenant}, owner=user, tenant=tenant)
    counts = {path: api.get(f"/api/{path}/", {"tenant": "globex"}).json()["count"]
              for path in ("messages", "deliveries", "subscriptions")}
    assert counts == {"messages": 2, "deliveries": 2, "subscriptions": 1}
    assert api.get("/api/deliveries/").json()["count"] == 3 + 3  # each message also reaches the owner's own


def test_a_tenant_is_named_by_its_external_id_in_paths(shop):
    api = shop["api"]
    by_name = api.get("/api/tenants/acme/")
    assert by_name.status_code == 200 and by_name.json()["id"] == shop["acme"]["tenant"]["id"]
    assert api.post("/api/tenants/acme/portal-link/", {}, format="json").status_code == 201
    assert api.get("/api/tenants/initech/").status_code == 404
    assert shop["globex"]["client"].get("/api/tenants/acme/").status_code == 404  # a tenant's key: not its route


@override_settings(ROOT_URLCONF="tests.mounted_urls")
def test_hints_name_routes_where_herald_is_mounted(shop):
    api, orders = shop["api"], shop["orders"]
    unknown = api.post(f"/herald/api/topics/{orders['id']}/publish/", {"payload": 1, "tenant": "initech"},
                       format="json")
    assert unknown.status_code == 400 and "POST /herald/api/tenants/" in unknown.json()["tenant"][0]
    again = api.post("/herald/api/tenants/", {"external_id": "acme", "name": "Another name"}, format="json")
    acme = shop["acme"]["tenant"]["id"]
    assert again.status_code == 409 and f"PATCH /herald/api/tenants/{acme}/" in str(again.json())


def test_an_all_digit_key_naming_two_tenants_is_refused_not_guessed(shop):
    api, acme = shop["api"], shop["acme"]["tenant"]["id"]
    assert api.post("/api/tenants/", {"external_id": str(acme), "name": "Numbered"}, format="json").status_code == 201
    answer = api.delete(f"/api/tenants/{acme}/")
    assert answer.status_code == 409 and "both a tenant's id and another tenant's external id" in str(answer.json())
    assert Tenant.objects.filter(id=acme).exists()

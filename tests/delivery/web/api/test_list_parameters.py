"""Every route of the API takes the query parameters it documents and refuses the others (400 naming them), as a
body refuses an unknown field: `?tenant=globex` where a list has no tenant filter listed everything, and
`?outcom=filtered_out` on a message's fan-out listed every row (delivery/web/api/strict.py). Owners filter by
tenant where objects have one, and name a tenant by its external id in paths."""

import uuid

import pytest
from django.test import override_settings
from django.urls import URLResolver, reverse

from delivery import urls
from delivery.events import publish
from delivery.models import Delivery
from delivery.urls import router
from delivery.web.api.base import HeraldAPI
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


def walk(patterns):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns)
        elif pattern.name and "format" not in pattern.pattern.regex.groupindex:
            yield pattern


def api_routes():
    """(name, methods) of every route Herald's API serves (every view built on HeraldAPI), a new one included."""
    for pattern in walk(urls.urlpatterns):
        view = getattr(pattern.callback, "cls", None)
        if view and issubclass(view, HeraldAPI):
            actions = getattr(pattern.callback, "actions", None)
            methods = list(actions) if actions else [m for m in ("get", "post", "patch", "delete") if hasattr(view, m)]
            yield pattern.name, tuple(methods)


API_ROUTES = sorted(set(api_routes()))


@pytest.fixture
def ids(shop, user, api):
    """A real object behind every kind of route, the owner's own."""
    message = publish("orders", {"n": 1}, owner=user, tenant="acme")
    delivery = Delivery.objects.filter(message=message).order_by("id").first()
    event_type = api.post("/api/event-types/", {"name": "order.created"}, format="json").json()
    return {"topic": shop["orders"]["id"], "tenant": shop["acme"]["tenant"]["id"], "subscription": shop["own"][0]["id"],
            "message": message.id, "delivery": delivery.id, "endpoint": delivery.endpoint_id,
            "eventtype": event_type["id"], "keys_id": uuid.uuid4()}


def address(name: str, ids: dict) -> str:
    """The route's address, naming a real object of the owner's (any key set's id: the refusal comes first)."""
    arguments = next(pattern.pattern.regex.groupindex for pattern in walk(urls.urlpatterns) if pattern.name == name)
    kwargs = {argument: ids["keys_id"] if argument == "keys_id" else ids[name.split("-")[0]] for argument in arguments}
    return reverse(f"herald:{name}", kwargs=kwargs)


def test_the_walk_covers_lists_details_and_their_actions():
    walked = {name for name, _ in API_ROUTES}
    assert {"message-fanout", "subscription-dead-letters", "subscription-metrics", "topic-metrics", "topic-detail",
            "delivery-detail", "tenant-keys", "portal-settings", "policy-preview", "topic-publish"} <= walked


@pytest.mark.parametrize(("name", "methods"), API_ROUTES, ids=lambda route: str(route))
def test_every_route_refuses_a_parameter_it_does_not_take(shop, ids, name, methods):
    api, url = shop["api"], address(name, ids)
    for method in methods:
        refused = getattr(api, method)(f"{url}?format=json&no_such_parameter=x")
        assert refused.status_code == 400 and list(refused.json()) == ["no_such_parameter"], (
            method, url, refused.status_code, refused.content)
        assert "is not a parameter of this" in refused.json()["no_such_parameter"][0]
        assert "format" in refused.json()["no_such_parameter"][0]  # what it takes, named
    if "get" in methods:  # DRF's format switch: every route takes it
        assert "is not a parameter" not in api.get(url, {"format": "json"}).content.decode(), url


def test_routes_take_the_parameters_they_document(shop, ids):
    api, message, subscription = shop["api"], ids["message"], ids["subscription"]
    fanout = api.get(f"/api/messages/{message}/fanout/", {"outcome": "delivery_created", "limit": 1, "offset": 0,
                                                           "subscription": subscription})
    assert fanout.status_code == 200 and fanout.json()["count"] == 1, fanout.content
    misspelt = api.get(f"/api/messages/{message}/fanout/", {"outcom": "filtered_out"})
    assert misspelt.status_code == 400 and "outcome" in misspelt.json()["outcom"][0]  # names what it takes
    assert api.get(f"/api/subscriptions/{subscription}/dead-letters/", {"limit": 1, "offset": 0}).status_code == 200
    for kind in ("subscriptions", "topics"):
        pk = ids[kind[:-1]]
        assert api.get(f"/api/{kind}/{pk}/metrics/", {"window": "1h"}).status_code == 200
        assert api.get(f"/api/{kind}/{pk}/metrics/", {"windw": "1h"}).status_code == 400
    assert api.get(f"/api/deliveries/{ids['delivery']}/", {"expand": "attempts"}).status_code == 400
    confirm = api.get("/api/subscriptions/confirm/", {"token": "nope"})
    assert confirm.json() == {"token": ["This confirmation token is not valid."]}  # read, and refused as a token

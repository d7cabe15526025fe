"""A path segment that no object can be named by answers 404 on every route, never a 500 and never another object:
Unicode digits (`"²".isdigit()` is true and `int("²")` raises; `int("٣")` is 3), NUL (PostgreSQL refuses it in
text) and other control characters, more digits than an id can have. The walk takes every named route Herald
serves, so a new route is walked too (delivery/web/api/ownership.py, `path_key`)."""

from urllib.parse import urlsplit

import pytest
from django.urls import NoReverseMatch, URLResolver, reverse

from delivery import urls
from delivery.engine.accounts import tenancy
from delivery.events import publish
from delivery.models import Delivery
from subscriptions.models import Tenant
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture

HOSTILE = ["²", "①", "\x00", "a\x00b", "orders\x00", "\x01", "\x7f", "acme\n"]
TOO_LONG_FOR_AN_ID = "9" * 20  # past PostgreSQL's bigint: a name, which ids-only routes do not have
METHODS = ("get", "post", "patch", "delete")


def unicode_digits(number: int) -> str:
    """`number` in Arabic-Indic digits: `int()` reads them as the number itself."""
    return "".join(chr(0x0660 + int(digit)) for digit in str(number))


def routes(patterns=urls.urlpatterns, arguments=()):
    """(name, path arguments) of every named route, the portal's included."""
    for pattern in patterns:
        names = (*arguments, *getattr(pattern.pattern, "converters", {}),
                 *getattr(getattr(pattern.pattern, "regex", None), "groupindex", {}))
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, names)
        elif pattern.name and "format" not in names:
            yield pattern.name, tuple(dict.fromkeys(names))


ROUTES = sorted(set(routes()))


def test_the_walk_covers_the_routes_that_failed():
    walked = {name for name, _ in ROUTES}
    assert {"tenant-detail", "tenant-keys", "tenant-portal-link", "topic-publish", "topic-publish-batch",
            "topic-metrics", "portal-subscription-action"} <= walked
    assert len(walked) >= 40


@pytest.fixture
def objects(shop, user):
    """The real id behind each route's name, and a portal link of acme's."""
    published = publish("orders", {"n": 1}, owner=user, tenant="acme")
    delivery = Delivery.objects.filter(message_id=published.id).order_by("id").first()
    link = tenancy.portal_link(Tenant.objects.get(external_id="acme"))
    return {"topic": shop["orders"]["id"], "tenant": shop["acme"]["tenant"]["id"],
            "subscription": shop["own"][0]["id"], "delivery": delivery.id, "endpoint": delivery.endpoint_id,
            "portal": urlsplit(link).path.split("/")[2], "portal-subscription": shop["acme"]["subscription"]["id"]}


def url_of(name: str, arguments: tuple, hostile_at: str, value: str, objects: dict) -> str | None:
    """The route's address with `value` at `hostile_at` and real values elsewhere; None where the route's
    converter cannot hold `value` (Django answers 404 without reaching the view)."""
    kwargs = {}
    for argument in arguments:
        if argument == hostile_at:
            kwargs[argument] = value
        elif argument == "token":
            kwargs[argument] = objects["portal"]
        elif argument == "subscription_id":
            kwargs[argument] = objects["portal-subscription"]
        elif argument == "name":
            kwargs[argument] = "pause"
        else:
            kwargs[argument] = objects["delivery"]
    try:
        return reverse(f"herald:{name}", kwargs=kwargs)
    except NoReverseMatch:
        return None


@pytest.mark.parametrize(("name", "arguments"), [route for route in ROUTES if route[1]], ids=lambda r: str(r))
def test_every_route_answers_404_for_a_segment_nothing_is_named_by(shop, objects, name, arguments):
    clients = {"owner": shop["api"], "tenant": shop["acme"]["client"]}
    kind = name.split("-")[0]
    own_id = objects[kind] if kind in ("topic", "tenant", "subscription", "endpoint") else objects["delivery"]
    for hostile_at in arguments:
        for value in [*HOSTILE, unicode_digits(own_id), TOO_LONG_FOR_AN_ID]:
            url = url_of(name, arguments, hostile_at, value, objects)
            if url is None:
                continue
            for who, client in clients.items():
                for method in METHODS:
                    response = getattr(client, method)(url)
                    if name.startswith("portal"):  # a token Herald did not sign is a 403 page; POST-only: 405
                        assert response.status_code in (403, 404, 405), (who, method, url, response.status_code)
                    elif value == TOO_LONG_FOR_AN_ID:  # a name: a method the route lacks answers 405 first
                        assert response.status_code in (404, 405), (who, method, url, response.status_code)
                    else:
                        assert response.status_code == 404, (who, method, url, response.status_code)
                        assert response["Content-Type"] == "application/json", (who, method, url)


def test_a_topic_or_tenant_is_still_named_by_its_id_or_name(shop):
    api, orders, acme = shop["api"], shop["orders"], shop["acme"]["tenant"]
    assert api.get(f"/api/topics/{orders['id']}/").json()["name"] == "orders"
    assert api.get("/api/topics/orders/").json()["id"] == orders["id"]
    assert api.get(f"/api/tenants/{acme['id']}/").json()["external_id"] == "acme"
    assert api.get("/api/tenants/acme/").json()["id"] == acme["id"]
    assert api.get(f"/api/topics/{unicode_digits(orders['id'])}/").status_code == 404

"""The catalog's entries (engine/accounts/event_types.py): what a name and a description may be, the same through
the API and the admin, and a rename or delete that would strand tenants' chosen lists answered with a 409 naming
who uses the type."""

import pytest

from delivery.engine.accounts import event_types
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules.catalog_entry import MAX_DESCRIPTION_CHARS
from subscriptions.models import EventType, Subscription
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.delivery.web.api.shop import tenant_chooses

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared


def test_a_description_is_bounded(api, admin_client, user):
    longest = "d" * MAX_DESCRIPTION_CHARS
    assert api.post("/api/event-types/", {"name": "a.b", "description": longest}, format="json").status_code == 201
    refused = api.post("/api/event-types/", {"name": "a.c", "description": longest + "d"}, format="json")
    assert refused.status_code == 400 and list(refused.json()) == ["description"], refused.content
    assert f"at most {MAX_DESCRIPTION_CHARS} characters" in refused.json()["description"][0]
    made = EventType.objects.get(name="a.b")
    grown = api.patch(f"/api/event-types/{made.id}/", {"description": longest + "d"}, format="json")
    assert grown.status_code == 400 and "description" in grown.json()
    page = admin_client.post("/admin/herald_subscriptions/eventtype/add/", {
        "owner": user.id, "name": "a.d", "description": longest + "d", "schema": "null", "example": "null"})
    assert page.status_code == 200 and f"at most {MAX_DESCRIPTION_CHARS} characters" in page.content.decode()
    assert list(EventType.objects.values_list("name", flat=True)) == ["a.b"]


@pytest.mark.parametrize("name", ["herald.subscription.confirmation", "herald.endpoint.frozen", "herald.test"])
def test_herald_names_are_refused_in_the_catalog(api, admin_client, user, name):
    refused = api.post("/api/event-types/", {"name": name}, format="json")
    assert refused.status_code == 400 and list(refused.json()) == ["name"], refused.content
    assert "Herald's own" in refused.json()["name"][0]
    other = api.post("/api/event-types/", {"name": "order.created"}, format="json").json()
    renamed = api.patch(f"/api/event-types/{other['id']}/", {"name": name}, format="json")
    assert renamed.status_code == 400 and "name" in renamed.json()
    page = admin_client.post("/admin/herald_subscriptions/eventtype/add/", {
        "owner": user.id, "name": name, "schema": "null", "example": "null"})
    assert page.status_code == 200 and "Herald&#x27;s own" in page.content.decode()
    with pytest.raises(ApplicationError, match="Herald's own"):
        event_types.event_type_create(owner=user, name=name)
    assert list(EventType.objects.values_list("name", flat=True)) == ["order.created"]


@pytest.fixture
def chosen(shop):
    """Alice's catalog of order.created and order.shipped; acme chose order.created."""
    api = shop["api"]
    made = {name: api.post("/api/event-types/", {"name": name}, format="json").json()
            for name in ("order.created", "order.shipped")}
    tenant_chooses(shop, "acme", "order.created")
    return made


def test_renaming_or_deleting_a_type_a_tenant_chose_is_a_409_naming_who_uses_it(shop, chosen, admin_client):
    api, used = shop["api"], chosen["order.created"]
    sub = shop["acme"]["subscription"]["id"]
    renamed = api.patch(f"/api/event-types/{used['id']}/", {"name": "order.placed"}, format="json")
    assert renamed.status_code == 409, renamed.content
    assert renamed.json()["subscriptions"] == [sub] and renamed.json()["tenants"] == ["acme"]
    assert "order.created" in renamed.json()["name"][0]
    deleted = api.delete(f"/api/event-types/{used['id']}/")
    assert deleted.status_code == 409 and deleted.json()["tenants"] == ["acme"], deleted.content
    assert EventType.objects.filter(id=used["id"], name="order.created").exists()
    admin = admin_client.post(f"/admin/herald_subscriptions/eventtype/{used['id']}/delete/", {"post": "yes"},
                              follow=True)
    assert "acme" in admin.content.decode() and EventType.objects.filter(id=used["id"]).exists()
    # what no tenant chose changes freely; a description changes freely
    assert api.patch(f"/api/event-types/{used['id']}/", {"description": "new words"}, format="json").status_code == 200
    unused = chosen["order.shipped"]["id"]
    assert api.patch(f"/api/event-types/{unused}/", {"name": "order.sent"}, format="json").status_code == 200
    assert api.delete(f"/api/event-types/{unused}/").status_code == 204


def test_deprecating_a_chosen_type_leaves_the_tenants_list_savable(shop, chosen, client):
    api, acme = shop["api"], shop["acme"]["client"]
    sub = shop["acme"]["subscription"]["id"]
    assert api.patch(f"/api/event-types/{chosen['order.created']['id']}/", {"deprecated": True},
                     format="json").status_code == 200
    unchanged = acme.patch(f"/api/subscriptions/{sub}/", {"event_types": ["order.created", "order.shipped"]},
                           format="json")
    assert unchanged.status_code == 200, unchanged.content  # what it had stays; what it adds is from the catalog
    assert Subscription.objects.get(id=sub).event_types == ["order.created", "order.shipped"]
    added = acme.patch(f"/api/subscriptions/{sub}/", {"event_types": ["order.created", "order.legacy"]},
                       format="json")
    assert added.status_code == 400 and "order.legacy" in added.json()["event_types"][0]

"""The page of each owner's portal settings (console/portal_settings.py): written through the service the API calls,
which asks the rules; the owner fixed once made; changed, never deleted."""

import pytest

from delivery.engine.accounts import tenancy
from subscriptions.models import Portal
from tests.delivery.web.console.pages import form_errors

pytestmark = pytest.mark.django_db

PORTALS = "/admin/herald_subscriptions/portal/"


def settings_form(**fields) -> dict:
    return {"name": "Alice's shop", "logo_url": "", "colour": "#aa3300", "frame_ancestors": "[]", "refresh_url": "",
            **fields}


def test_an_owners_portal_is_set_up_through_the_service(admin_client, user):
    made = admin_client.post(PORTALS + "add/", settings_form(
        owner=user.id, frame_ancestors='["https://app.alice.example"]', refresh_url="https://app.alice.example/r"))
    assert (made.status_code, made.url) == (302, PORTALS)
    portal = Portal.objects.get()
    assert (portal.owner, portal.name, portal.colour, portal.frame_ancestors, portal.refresh_url) == (
        user, "Alice's shop", "#aa3300", ["https://app.alice.example"], "https://app.alice.example/r")
    assert "<td class=\"field-colour\">#aa3300</td>" in admin_client.get(PORTALS).content.decode()


def test_an_edit_keeps_the_owner_and_is_checked_by_the_rules(admin_client, user):
    portal = tenancy.portal_update(owner=user, name="Shop", colour="#aa3300")
    page = admin_client.get(f"{PORTALS}{portal.id}/change/").content.decode()
    assert 'name="owner"' not in page and 'name="name"' in page

    refused = admin_client.post(f"{PORTALS}{portal.id}/change/", settings_form(
        name="Renamed", frame_ancestors='["https://x; script-src *"]'))
    assert list(form_errors(refused.content.decode())) == ["frame_ancestors"]
    assert "not an origin" in form_errors(refused.content.decode())["frame_ancestors"][0]
    assert Portal.objects.get().name == "Shop"  # nothing written, the name neither

    saved = admin_client.post(f"{PORTALS}{portal.id}/change/", settings_form(name="Renamed", colour="#003366"))
    assert saved.status_code == 302
    stored = Portal.objects.get()
    assert (stored.owner, stored.name, stored.colour) == (user, "Renamed", "#003366")


def test_portal_settings_are_never_deleted(admin_client, user):
    portal = tenancy.portal_update(owner=user, name="Shop")
    assert "deletelink" not in admin_client.get(f"{PORTALS}{portal.id}/change/").content.decode()
    assert admin_client.post(f"{PORTALS}{portal.id}/delete/", {"post": "yes"}).status_code == 403
    assert Portal.objects.filter(id=portal.id).exists()


def test_an_owners_tenants_are_let_write_transformations_here_too(admin_client, user):
    portal = tenancy.portal_update(owner=user, name="Shop")
    page = admin_client.get(f"{PORTALS}{portal.id}/change/").content.decode()
    assert 'name="allow_transformations"' in page
    saved = admin_client.post(f"{PORTALS}{portal.id}/change/", settings_form(allow_transformations="on"))
    assert saved.status_code == 302 and Portal.objects.get().allow_transformations is True
    admin_client.post(f"{PORTALS}{portal.id}/change/", settings_form())  # the box left unticked
    assert Portal.objects.get().allow_transformations is False

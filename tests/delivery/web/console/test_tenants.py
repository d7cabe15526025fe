"""The tenants' pages (console/tenants.py): registered and edited through the service the API calls, a key shown
once in the message that made it, keys revoked not deleted, a read-only portal link for support."""

import json
import re

import pytest

from delivery.engine.accounts import tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules import tenant_rules
from subscriptions.models import Tenant, TenantKey
from tests.delivery.web.console.pages import shown_messages

pytestmark = pytest.mark.django_db

TENANTS = "/admin/herald_subscriptions/tenant/"
KEYS = "/admin/herald_subscriptions/tenantkey/"


def test_tenants_in_the_admin(admin_client, user):
    """Register a tenant, give it a key (shown once, in the message), revoke it."""
    added = admin_client.post(TENANTS + "add/", {
        "owner": user.id, "external_id": "acme", "name": "Acme Ltd", "metadata": "{}"})
    assert added.status_code == 302, added.content[:2000]
    tenant = Tenant.objects.get(external_id="acme")
    made = admin_client.post(TENANTS, {"action": "new_key", "_selected_action": [tenant.id]}, follow=True)
    key = TenantKey.objects.get(tenant=tenant)
    shown = re.search(r"htk_[A-Za-z0-9_-]+", made.content.decode()).group(0)
    assert shown.startswith(key.prefix) and key.key_hash != shown
    assert shown not in admin_client.get(f"{TENANTS}{tenant.id}/change/").content.decode()
    admin_client.post(KEYS, {"action": "revoke", "_selected_action": [key.id]})
    assert TenantKey.objects.get(id=key.id).revoked_at is not None
    for page in [TENANTS, KEYS, f"{TENANTS}{tenant.id}/change/"]:
        assert admin_client.get(page).status_code == 200, page


def test_a_tenants_rules_hold_at_every_door(admin_client, api, user):
    """Metadata is an object of at most 4 KiB as JSON (rules/tenant_rules.py), asked by the service: through the
    API, the admin and Python alike, refused with the field named and nothing written."""
    big = {"notes": "x" * tenant_rules.MAX_METADATA_BYTES}
    through_api = api.post("/api/tenants/", {"external_id": "acme", "name": "Acme", "metadata": big}, format="json")
    assert through_api.status_code == 400 and "metadata" in through_api.json(), through_api.content
    with pytest.raises(ApplicationError) as refused:
        tenancy.tenant_create(owner=user, external_id="acme", metadata=big)
    assert refused.value.field == "metadata"
    assert not Tenant.objects.exists()

    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    assert api.patch(f"/api/tenants/{tenant.id}/", {"metadata": ["a list"]}, format="json").json() == {
        "metadata": ["must be an object"]}
    page = admin_client.post(f"{TENANTS}{tenant.id}/change/", {"name": "Acme Ltd", "metadata": json.dumps(big)})
    assert page.status_code == 200 and "must be at most 4096 bytes as JSON" in page.content.decode()
    assert Tenant.objects.get(id=tenant.id).name == "Acme"  # nothing written, the name neither
    saved = admin_client.post(f"{TENANTS}{tenant.id}/change/", {"name": "Acme Ltd", "metadata": '{"plan": "gold"}'})
    assert saved.status_code == 302
    assert (Tenant.objects.get(id=tenant.id).name, Tenant.objects.get(id=tenant.id).metadata) == (
        "Acme Ltd", {"plan": "gold"})


def test_a_second_tenant_of_the_same_id_is_refused_on_the_field(admin_client, user):
    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    again = admin_client.post(TENANTS + "add/", {"owner": user.id, "external_id": "acme", "name": "Acme",
                                                 "metadata": "{}"})
    assert again.status_code == 200
    assert "alice already has a tenant &#x27;acme&#x27;." in again.content.decode()
    renamed = admin_client.post(TENANTS + "add/", {"owner": user.id, "external_id": "acme", "name": "Other",
                                                   "metadata": "{}"})
    assert renamed.status_code == 200
    assert (f"You already have a tenant &#x27;acme&#x27; (id {tenant.id}) with a different name; change it with "
            f"PATCH /api/tenants/{tenant.id}/.") in renamed.content.decode()
    assert list(Tenant.objects.values_list("name", flat=True)) == ["Acme"]


def test_what_publishes_name_a_tenant_by_is_read_only_once_made(admin_client, user):
    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    page = admin_client.get(f"{TENANTS}{tenant.id}/change/").content.decode()
    assert 'name="name"' in page and 'name="external_id"' not in page and 'name="owner"' not in page
    assert "none (the “Create an API key” action makes one)" in page


def test_the_page_lists_its_keys_without_their_secrets(admin_client, user):
    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    key, plaintext = tenancy.tenant_key_create(tenant=tenant, name="ci")
    reader, _ = tenancy.tenant_key_create(tenant=tenant, name="dashboards", read_only=True)
    tenancy.tenant_key_revoke(key=key)
    page = admin_client.get(f"{TENANTS}{tenant.id}/change/").content.decode()
    revoked = TenantKey.objects.get(id=key.id).revoked_at
    assert (f"<div><code>{key.prefix}…</code> ci · revoked {revoked:%Y-%m-%d}</div>"
            f"<div><code>{reader.prefix}…</code> dashboards · read-only</div>") in page
    assert plaintext not in page


def test_the_portal_link_action_opens_the_tenants_portal_read_only(admin_client, client, user):
    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    response = admin_client.post(TENANTS, {"action": "portal_link", "_selected_action": [tenant.id]}, follow=True)
    [(level, text)] = shown_messages(response)
    link = re.fullmatch(r'Acme \(acme\): <a href="(/portal/[^"]+/)" target="_blank" rel="noreferrer">the portal, '
                        r"read-only</a>", text)
    assert level == "success" and link, text
    assert client.get(link.group(1)).status_code == 200


def test_keys_are_made_and_revoked_never_added_edited_or_deleted_by_hand(admin_client, user):
    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    key, _ = tenancy.tenant_key_create(tenant=tenant, name="ci")
    assert admin_client.get(KEYS + "add/").status_code == 403
    assert admin_client.post(f"{KEYS}{key.id}/delete/", {"post": "yes"}).status_code == 403
    page = admin_client.get(f"{KEYS}{key.id}/change/").content.decode()
    assert 'name="name"' not in page and 'name="read_only"' not in page
    response = admin_client.post(KEYS, {"action": "revoke", "_selected_action": [key.id]}, follow=True)
    assert shown_messages(response) == [("success", "1 key(s) revoked.")]
    assert TenantKey.objects.filter(id=key.id, revoked_at__isnull=False).exists()

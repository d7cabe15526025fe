"""Tenants from code (docs/tenants.md): register an owner's customers, give them keys and portal links.

    from delivery.tenants import portal_link, tenant_create

    acme, _ = tenant_create(owner=shop, external_id="acme", name="Acme Ltd")
    url = portal_link(acme, ttl=timedelta(hours=1))        # HERALD_PUBLIC_URL + /…/portal/<token>/
    publish("invoices", {...}, owner=shop, tenant="acme")  # delivery.events.publish: Acme's subscriptions only
"""

from delivery.engine.accounts.tenancy import portal_link, tenant_create, tenant_key_create, tenant_key_revoke

__all__ = ["portal_link", "tenant_create", "tenant_key_create", "tenant_key_revoke"]

"""Tenants: an owner's customers as principals of their own (docs/tenants.md).

An owner registers tenants, opens topics (and catalog event types) to them, and hands each one credentials: API
keys (shown once, kept as a SHA-256) or portal links (signed, expiring, one tenant, optionally read-only). With
them a tenant manages its own subscriptions on the open topics and sees its own deliveries; everything else
answers 404, as another owner's objects do.

    tenant, _ = tenant_create(owner=shop, external_id="acme", name="Acme Ltd")
    key, plaintext = tenant_key_create(tenant=tenant)      # plaintext: shown this once
    url = portal_link(tenant, ttl=timedelta(hours=1))      # https://…/portal/<token>/ for the tenant's browser
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse

from delivery.conf import herald, public_url
from delivery.engine.accounts import quotas, removal
from delivery.engine.plumbing import clock
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Delivery
from delivery.rules import portal_settings, tenant_rules
from subscriptions.models import Endpoint, Portal, Subscription, Tenant, TenantKey

KEY_PREFIX = "htk_"
PORTAL_SALT = "herald.portal"

NOT_ALLOWED = "Transformations are not allowed here: the owner's portal settings do not allow them for tenants."


def tenant_transformations(tenant) -> None:
    """A tenant's transformation is set or test-run where its owner's portal allows them, else a 403 (not removed)."""
    if tenant is not None and not Portal.objects.filter(owner_id=tenant.owner_id, allow_transformations=True).exists():
        raise ApplicationError(NOT_ALLOWED, field="transformation", status_code=403)


@dataclass(frozen=True)
class TenantAccess:
    """Who is asking, when it is a tenant: `request.auth` of a tenant key, the portal session's principal."""

    tenant: Tenant
    read_only: bool = False
    via: str = "key"  # "key" or "portal"

    @property
    def owner_id(self) -> int:
        return self.tenant.owner_id


def tenant_create(*, owner, external_id: str, name: str = "", metadata: dict | None = None) -> tuple[Tenant, bool]:
    """(tenant, created); registering an external id again returns the tenant (409 if it asks for a different
    name or metadata: change it with PATCH)."""
    found = tenant_rules.problems({"name": name, "metadata": metadata or {}})
    if found:
        raise ApplicationError.of_problems(found)
    existing = Tenant.objects.filter(owner=owner, external_id=external_id).first()
    if existing is None:
        quotas.tenants(owner)
        try:
            with transaction.atomic():
                return Tenant.objects.create(owner=owner, external_id=external_id, name=name or external_id,
                                             metadata=metadata or {}), True
        except IntegrityError:  # registered meanwhile by a concurrent request
            existing = Tenant.objects.get(owner=owner, external_id=external_id)
    different = [field for field, value in (("name", name), ("metadata", metadata))
                 if value and value != getattr(existing, field)]
    if different:
        path = reverse("herald:tenant-detail", args=[existing.id])
        raise ApplicationError(f"You already have a tenant {external_id!r} (id {existing.id}) with a different "
                               f"{' and '.join(different)}; change it with PATCH {path}.",
                               field="external_id", status_code=409)
    return existing, False


TENANT_FIELDS = ("name", "metadata")  # what changes after registering: the external id is the owner's key for it


def tenant_update(*, tenant: Tenant, **changes) -> Tenant:
    """The tenant with `changes` (name, metadata) applied; a 400 naming each the rules refuse, nothing written."""
    unknown = set(changes) - set(TENANT_FIELDS)
    if unknown:
        raise ApplicationError(f"{', '.join(sorted(unknown))}: not changed after registering (the external id is "
                               f"what your publishes name the tenant by)", field=sorted(unknown)[0])
    found = tenant_rules.problems(changes)
    if found:
        raise ApplicationError.of_problems(found)
    for name, value in changes.items():
        setattr(tenant, name, value)
    tenant.save(update_fields=list(changes) or None)
    return tenant


def tenant_delete(*, tenant: Tenant, now=None) -> None:
    """The tenant, its keys, subscriptions (with their deliveries) and endpoints. Messages published for it stay
    (the owner's own subscriptions had them too), addressed to nobody else from then on.

    All or nothing: its subscriptions, deliveries and endpoints are locked first, so no fan-out, claim or recorded
    attempt can add a row pointing at them before they go. A 409, and nothing deleted, while any of its deliveries
    is being sent (its worker is about to record the attempt): they finish within their send's deadline; one whose
    lease ran out (its worker died) is not waited for."""
    now = now or clock.now()
    with transaction.atomic():
        quotas.lock_tenant(tenant)
        # The order every delete locks in (removal.locked): endpoints first, as a health transition does.
        sending = removal.locked(endpoints=Endpoint.objects.filter(tenant=tenant),
                                 subscriptions=Subscription.objects.filter(tenant=tenant),
                                 deliveries=Delivery.objects.filter(tenant=tenant), now=now)
        if sending:
            raise ApplicationError(
                f"{tenant.name} has {sending} {'delivery' if sending == 1 else 'deliveries'} in flight (being sent "
                f"right now); nothing was deleted. Delete it again once they finish, within their send's deadline.",
                status_code=409)
        Subscription.objects.filter(tenant=tenant).delete()  # before the endpoints they protect
        tenant.delete()


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def tenant_key_create(*, tenant: Tenant, name: str = "", read_only: bool = False) -> tuple[TenantKey, str]:
    """(key record, the key itself): the key is shown to the caller this once and stored only as its hash."""
    quotas.tenant_keys(tenant)
    plaintext = KEY_PREFIX + secrets.token_urlsafe(32)
    record = TenantKey.objects.create(tenant=tenant, name=name, prefix=plaintext[:12], key_hash=_hash(plaintext),
                                      read_only=read_only)
    return record, plaintext


def tenant_key_revoke(*, key: TenantKey, now=None) -> TenantKey:
    if key.revoked_at is None:
        key.revoked_at = now or clock.now()
        key.save(update_fields=["revoked_at"])
    return key


def key_access(plaintext: str) -> TenantAccess | None:
    """The access a tenant key grants, or None (unknown or revoked)."""
    if not plaintext.startswith(KEY_PREFIX) or len(plaintext) > 100:
        return None
    record = (TenantKey.objects.select_related("tenant", "tenant__owner")
              .filter(key_hash=_hash(plaintext), revoked_at=None).first())
    if record is None or not record.tenant.owner.is_active:
        return None
    return TenantAccess(record.tenant, record.read_only, "key")


def portal_token(tenant: Tenant, *, ttl: timedelta = timedelta(hours=1), read_only: bool = False, now=None) -> str:
    """A signed token naming the tenant, whether it may change anything, and when it stops working."""
    seconds = int(ttl.total_seconds())
    if not 0 < seconds <= herald.PORTAL_LINK_MAX_SECONDS:
        raise ApplicationError(f"must be between 1 second and {herald.PORTAL_LINK_MAX_SECONDS} seconds "
                               f"(HERALD_PORTAL_LINK_MAX_SECONDS)", field="ttl")
    expires = int((now or clock.now()).timestamp()) + seconds
    return signing.dumps([tenant.id, int(read_only), expires], salt=PORTAL_SALT, compress=True)


def portal_link(tenant: Tenant, *, ttl: timedelta = timedelta(hours=1), read_only: bool = False, now=None) -> str:
    """A portal link for `tenant`: the full URL (HERALD_PUBLIC_URL, then `/portal/<token>/` under Herald's URLs)
    that the owner's backend hands to the tenant's browser; the API's portal-link answers the same."""
    return public_url(reverse("herald:portal-home",
                              args=[portal_token(tenant, ttl=ttl, read_only=read_only, now=now)]))


PORTAL_FIELDS = ("name", "logo_url", "colour", "frame_ancestors", "refresh_url", "allow_transformations")


def portal_update(*, owner, **changes) -> Portal:
    """The owner's portal settings with `changes` applied; a 400 naming each setting the rules refuse
    (rules/portal_settings.py: its frame_ancestors go into a header of every portal answer)."""
    unknown = set(changes) - set(PORTAL_FIELDS)
    if unknown:
        raise ApplicationError(f"not a portal setting: {', '.join(sorted(unknown))}")
    found = portal_settings.problems(changes)
    if found:
        raise ApplicationError.of_problems(found)
    portal, _ = Portal.objects.get_or_create(owner=owner)
    for name, value in changes.items():
        setattr(portal, name, value)
    portal.save()
    return portal


class LinkRefused(Exception):
    """The portal link is forged, expired or names a tenant that no longer exists. `owner_id`: whose portal a
    genuine but expired link was (its page is branded and may send the browser to the owner's refresh URL);
    None for a link Herald did not sign, which names nobody."""

    def __init__(self, reason: str, owner_id: int | None = None, expired_for: int | None = None):
        super().__init__(reason)
        self.owner_id, self.expired_for = owner_id, expired_for  # expired_for: seconds since it expired


def portal_access(token: str, now=None) -> tuple[TenantAccess, int]:
    """(access, expires at as a Unix time) for a portal token; LinkRefused otherwise."""
    try:
        tenant_id, read_only, expires = signing.loads(token, salt=PORTAL_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        raise LinkRefused("This link is not valid.") from None
    tenant = Tenant.objects.select_related("owner").filter(id=tenant_id).first()
    if tenant is None or not tenant.owner.is_active:
        raise LinkRefused("This link is not valid.")
    moment = int((now or clock.now()).timestamp())
    if moment >= expires:
        raise LinkRefused("This link has expired; open the page again from the app that gave it to you.",
                          owner_id=tenant.owner_id, expired_for=moment - expires)
    return TenantAccess(tenant, bool(read_only), "portal"), expires

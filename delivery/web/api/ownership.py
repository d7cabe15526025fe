"""Every object belongs to an owner: others get 404 (never 403, which would leak that it exists); staff see all.
A tenant (docs/tenants.md) sees its own objects of its owner's only, and the topics open to tenants, without the
owner's tuning of them (`OwnerTuning`).

A path names an object by its id or, for topics and tenants, by its name; `path_key` reads that part of the path
for every route (HeraldAPI.initial), so what no object can be named by answers 404 before any lookup: `"²"` and
`"①"` pass `str.isdigit()` and break `int()`, `int("٣")` is 3, and PostgreSQL refuses NUL in text."""

import re
from collections.abc import Mapping

from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.generics import get_object_or_404

from delivery.engine.accounts.tenancy import TenantAccess

# Every name a path may hold: a topic's (letters, digits, `_.-`), a tenant's external id (and `:@`), an id, a UUID.
NAMEABLE = re.compile(r"[A-Za-z0-9_.:@-]{1,256}")
MAX_ID_DIGITS = 18  # an id fits PostgreSQL's bigint; more digits can only be a name


def path_key(value: str) -> int | str:
    """What a path's segment names an object by: an int for ASCII digits (an id), else the text (a name or a UUID).
    Anything no object can be named by, such as Unicode digits or control characters, is NotFound."""
    if not NAMEABLE.fullmatch(value):
        raise NotFound("No object has this id or name.")
    return int(value) if value.isdigit() and len(value) <= MAX_ID_DIGITS else value


def refuse_unnameable(kwargs: dict) -> None:
    """A route's path arguments: NotFound for one that no object can be named by (converted ones, a UUID, pass)."""
    for value in kwargs.values():
        if isinstance(value, str):
            path_key(value)


def tenant_of(request) -> TenantAccess | None:
    """The tenant a request speaks for (a tenant key's `request.auth`), or None for an owner."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, TenantAccess) else None


def tenant_scope(queryset, access, owner_path: str, tenant_path: str | None):
    """The tenant's own objects among `queryset`: `tenant_path` names the model's tenant ("open" for topics: the
    owner's topics open to tenants); None: nothing."""
    if tenant_path is None:
        return queryset.none()
    if tenant_path == "open":
        return queryset.filter(**{owner_path: access.owner_id, "open_to_tenants": True})
    return queryset.filter(**{owner_path: access.owner_id, tenant_path: access.tenant})


class OwnedQuerysetMixin:
    owner_path = "owner"  # the lookup from the model to its owning user
    tenant_path = None  # the lookup from the model to its tenant; None: a tenant sees none of them

    def get_queryset(self):
        queryset = super().get_queryset()
        access = tenant_of(self.request)
        if access is not None:  # before staff: a staff owner's tenant is still a tenant
            return tenant_scope(queryset, access, self.owner_path, self.tenant_path)
        user = self.request.user
        if getattr(self, "swagger_fake_view", False) or not user.is_authenticated:
            return queryset.none()
        if user.is_staff:
            return queryset
        return queryset.filter(**{self.owner_path: user})

    def owned_object(self):
        """`get_object()` without the list filters (django-filter, ordering), which an action on one object does
        not use: on the publish path they cost more than the lookup."""
        obj = get_object_or_404(self.get_queryset(), pk=self.kwargs[self.lookup_url_kwarg or self.lookup_field])
        self.check_object_permissions(self.request, obj)
        return obj


def owned_choices(model, owner_path: str = "owner", tenant_path: str | None = None):
    """For a filter on a related object: the choices are the requester's own objects (all of them for staff; a
    tenant's own, by `tenant_path`), so another owner's id is refused exactly like an id that does not exist."""

    def choices(request):
        queryset = model.objects.all()
        access = tenant_of(request)
        if access is not None:
            return tenant_scope(queryset, access, owner_path, tenant_path)
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return queryset.none()
        return queryset if user.is_staff else queryset.filter(**{owner_path: user})

    return choices


class OwnerTuning:
    """A serializer mixin: a tenant's view leaves out `owner_tuning`, how the owner tunes delivery (retry policies,
    batch sizes, retention), which its customer can neither act on nor change; a tenant sending one of them gets a
    400 naming it. The owner's token sees and sets them all."""

    owner_tuning: tuple[str, ...] = ()

    def get_fields(self):
        fields = super().get_fields()
        if self._by_tenant():
            for name in self.owner_tuning:
                fields.pop(name, None)
        return fields

    def _by_tenant(self) -> bool:
        request = self.context.get("request")
        return request is not None and tenant_of(request) is not None

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and self._by_tenant():
            tuned = [name for name in self.owner_tuning if name in data]
            if tuned:
                raise serializers.ValidationError({name: [
                    "set by the owner of these webhooks (how events are delivered), not with a tenant key"]
                    for name in tuned})
        return super().to_internal_value(data)

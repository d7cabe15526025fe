"""The owner's side of tenants (docs/tenants.md): register them, give them keys and portal links. A tenant's key
reaches none of this (404)."""

from datetime import timedelta

from django.utils import timezone
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response

from delivery.conf import herald
from delivery.engine.accounts import tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.ownership import OwnedQuerysetMixin, path_key
from delivery.web.api.strict import StrictInput
from subscriptions.models import Tenant, TenantKey


class TenantSerializer(StrictInput, serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = ["id", "external_id", "name", "metadata", "created_at"]
        read_only_fields = ["id", "created_at"]


class TenantUpdateSerializer(TenantSerializer):
    external_id = serializers.CharField(read_only=True)


class TenantKeySerializer(StrictInput, serializers.ModelSerializer):
    class Meta:
        model = TenantKey
        fields = ["id", "name", "prefix", "read_only", "created_at", "revoked_at"]
        read_only_fields = ["id", "prefix", "created_at", "revoked_at"]


class TenantKeyCreatedSerializer(TenantKeySerializer):
    key = serializers.CharField(read_only=True, help_text="The key itself: shown this once, stored only hashed.")

    class Meta(TenantKeySerializer.Meta):
        fields = [*TenantKeySerializer.Meta.fields, "key"]


class RevokeKeySerializer(StrictInput, serializers.Serializer):
    key = serializers.IntegerField(help_text="The id of the key to revoke.")


class PortalLinkSerializer(StrictInput, serializers.Serializer):
    ttl_seconds = serializers.IntegerField(
        default=3600, help_text="How long the link works: 1 second to HERALD_PORTAL_LINK_MAX_SECONDS (7 days).")
    read_only = serializers.BooleanField(default=False, help_text="The tenant may look, not change anything.")

    def validate_ttl_seconds(self, value):
        longest = herald.PORTAL_LINK_MAX_SECONDS
        if not 1 <= value <= longest:
            raise serializers.ValidationError(f"must be between 1 and {longest} seconds "
                                              f"(HERALD_PORTAL_LINK_MAX_SECONDS)")
        return value


class PortalLinkCreatedSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="HERALD_PUBLIC_URL, then Herald's path to the portal: what "
                                          "delivery.tenants.portal_link() returns in Python.")
    expires_at = serializers.DateTimeField()
    read_only = serializers.BooleanField()


class TenantViewSet(HeraldAPI, OwnedQuerysetMixin, viewsets.ModelViewSet):
    """Your customers as tenants: `publish(..., tenant=external_id)` reaches only theirs (and your own
    subscriptions). Each gets API keys and portal links of its own."""

    queryset = Tenant.objects.all()
    serializer_class = TenantSerializer
    filterset_fields = ["external_id"]
    ordering_fields = ["id", "external_id", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    lookup_value_regex = r"[^/]+"  # an id, or an external id (which may hold dots): /api/tenants/acme/

    def _by_external_id(self) -> None:
        """The path names a tenant by id, or by external id. An all-digit key that is the external id of another
        of your tenants than the one with that id is ambiguous: a 409, never an action on the wrong tenant."""
        key = self.kwargs[self.lookup_field]
        named = path_key(key)  # an int for an id; 404 for what no tenant can be named by
        if not isinstance(named, int):
            self.kwargs[self.lookup_field] = str(get_object_or_404(self.get_queryset(), external_id=key).pk)
        elif self.get_queryset().filter(external_id=key).exclude(pk=named).exists():
            raise ApplicationError(f"{key!r} is both a tenant's id and another tenant's external id: name it with "
                                   f"?external_id={key} on the list, or by the id the list gives.",
                                   status_code=409)

    def get_object(self):
        self._by_external_id()
        return super().get_object()

    def owned_object(self):
        self._by_external_id()
        return super().owned_object()

    def get_serializer_class(self):
        if self.action == "partial_update":
            return TenantUpdateSerializer
        return self.serializer_class

    def create(self, request, *args, **kwargs):
        serializer = TenantSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant, created = tenancy.tenant_create(owner=request.user, **serializer.validated_data)
        return Response(TenantSerializer(tenant).data, status=status.HTTP_201_CREATED if created else 200)

    def perform_update(self, serializer):
        serializer.instance = tenancy.tenant_update(tenant=serializer.instance, **serializer.validated_data)

    def perform_destroy(self, instance):
        tenancy.tenant_delete(tenant=instance)

    @extend_schema(request=TenantKeySerializer, responses={201: TenantKeyCreatedSerializer,
                                                           200: TenantKeySerializer(many=True)})
    @action(detail=True, methods=["get", "post"], serializer_class=TenantKeySerializer)
    def keys(self, request, pk=None):
        """GET: the tenant's keys (never the keys themselves). POST: a new key, shown in the answer this once."""
        tenant = self.owned_object()
        if request.method == "GET":
            return Response(TenantKeySerializer(tenant.keys.all()[:100], many=True).data)
        serializer = TenantKeySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        record, plaintext = tenancy.tenant_key_create(tenant=tenant, **serializer.validated_data)
        record.key = plaintext
        return Response(TenantKeyCreatedSerializer(record).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RevokeKeySerializer, responses={200: TenantKeySerializer})
    @action(detail=True, methods=["post"], url_path="revoke-key", serializer_class=RevokeKeySerializer)
    def revoke_key(self, request, pk=None):
        tenant = self.owned_object()
        serializer = RevokeKeySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key = get_object_or_404(TenantKey, tenant=tenant, id=serializer.validated_data["key"])
        return Response(TenantKeySerializer(tenancy.tenant_key_revoke(key=key)).data)

    @extend_schema(request=PortalLinkSerializer, responses={201: PortalLinkCreatedSerializer})
    @action(detail=True, methods=["post"], url_path="portal-link", serializer_class=PortalLinkSerializer)
    def portal_link(self, request, pk=None):
        """A signed link to the tenant's portal, for your backend to hand to the tenant's browser (or an iframe)."""
        tenant = self.owned_object()
        serializer = PortalLinkSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        ttl, read_only = serializer.validated_data["ttl_seconds"], serializer.validated_data["read_only"]
        now = timezone.now()
        url = tenancy.portal_link(tenant, ttl=timedelta(seconds=ttl), read_only=read_only, now=now)
        body = {"url": url, "expires_at": now + timedelta(seconds=ttl), "read_only": read_only}
        return Response(PortalLinkCreatedSerializer(body).data, status=status.HTTP_201_CREATED)

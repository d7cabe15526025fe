"""The API of the event type catalog (docs/tenants.md): what subscribers and tenants choose from, with a JSON
Schema and an example; a tenant's key reads the types open to tenants. Each type's versions (docs/versions.md) are
listed and added under it, `versions/`: a tenant's key reads them (without the owner's down-converters), never
adds one."""

from django.db.models import Prefetch
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from delivery.engine.accounts import event_types
from delivery.rules import event_versions
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.ownership import OwnedQuerysetMixin, OwnerTuning
from delivery.web.api.strict import StrictInput
from subscriptions.models import EventType, EventTypeVersion


class EventTypeSerializer(StrictInput, serializers.ModelSerializer):
    """The entry's shapes; its rules are the service's (delivery/engine/accounts/event_types.py), the admin's too."""

    versions = serializers.SerializerMethodField(help_text="Its versions' names, oldest first (docs/versions.md).")
    latest_version = serializers.SerializerMethodField(help_text="Its latest version; empty: it has none.")

    class Meta:
        model = EventType
        fields = ["id", "name", "description", "schema", "example", "validate_payloads", "on_mismatch", "deprecated",
                  "open_to_tenants", "versions", "latest_version", "created_at"]
        read_only_fields = ["id", "created_at"]

    def get_versions(self, obj) -> list[str]:
        return sorted(version.name for version in obj.versions.all())

    def get_latest_version(self, obj) -> str:
        return event_versions.latest(self.get_versions(obj))


class EventTypeVersionSerializer(OwnerTuning, StrictInput, serializers.ModelSerializer):
    """A version's shapes; its rules (a name after the others, a schema and an example as an entry's, a
    down-converter that compiles) are the service's, the admin's too. A tenant's key does not see the
    down-converter: the owner's code, which its endpoint receives the result of."""

    owner_tuning = ("down_converter",)

    down_converter = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False,
        help_text="JavaScript function handler(webhook) turning a payload of this version into one of the version "
                  "before it; required for every version but the first, refused with its line if it does not "
                  "compile.")

    class Meta:
        model = EventTypeVersion
        fields = ["name", "schema", "example", "down_converter", "created_at"]
        read_only_fields = ["created_at"]


class EventTypeViewSet(HeraldAPI, OwnedQuerysetMixin, viewsets.ModelViewSet):
    """The catalog of event types you publish: what subscribers (and your tenants) choose from; with
    `validate_payloads`, a publish of that type whose payload does not match the schema is refused (400), or, with
    `on_mismatch` "record", published with the mismatch recorded on the message."""

    queryset = EventType.objects.prefetch_related(
        Prefetch("versions", queryset=EventTypeVersion.objects.only("id", "event_type_id", "name")))
    serializer_class = EventTypeSerializer
    tenant_path = "open"
    tenant_actions = frozenset({"list", "retrieve", "versions"})
    filterset_fields = ["name", "deprecated"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        serializer.instance = event_types.event_type_create(owner=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer):
        serializer.instance = event_types.event_type_update(event_type=serializer.instance,
                                                            **serializer.validated_data)

    def perform_destroy(self, instance):
        event_types.event_type_delete(event_type=instance)

    @extend_schema(responses={200: EventTypeVersionSerializer(many=True)}, paginated=True)
    @action(detail=True, methods=["get"], filter_backends=[], serializer_class=EventTypeVersionSerializer)
    def versions(self, request, pk=None):
        """The event type's versions, oldest first (paginated): each with its schema, example and down-converter."""
        event_type = self.owned_object()
        page = self.paginate_queryset(EventTypeVersion.objects.filter(event_type=event_type).order_by("name"))
        context = self.get_serializer_context()
        return self.get_paginated_response(EventTypeVersionSerializer(page, many=True, context=context).data)

    @extend_schema(request=EventTypeVersionSerializer, responses={201: EventTypeVersionSerializer})
    @versions.mapping.post
    def version_create(self, request, pk=None):
        """A new version of the event type, after its others (docs/versions.md): its name sorts after theirs, and
        every version but the first has a down-converter. Your subscriptions that followed the latest are pinned to
        the version that was the latest until now; each moves to the new one when its owner upgrades it."""
        event_type = self.owned_object()
        serializer = EventTypeVersionSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        version = event_types.event_version_create(event_type=event_type, **serializer.validated_data)
        return Response(EventTypeVersionSerializer(version, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

"""The API of the event type catalog (docs/tenants.md): what subscribers and tenants choose from, with a JSON
Schema and an example; a tenant's key reads the types open to tenants."""


from rest_framework import serializers, viewsets

from delivery.engine.accounts import event_types
from delivery.web.api.base import HeraldAPI
from delivery.web.api.ownership import OwnedQuerysetMixin
from delivery.web.api.strict import StrictInput
from subscriptions.models import EventType


class EventTypeSerializer(StrictInput, serializers.ModelSerializer):
    """The entry's shapes; its rules are the service's (delivery/engine/accounts/event_types.py), the admin's too."""

    class Meta:
        model = EventType
        fields = ["id", "name", "description", "schema", "example", "validate_payloads", "on_mismatch", "deprecated",
                  "open_to_tenants", "created_at"]
        read_only_fields = ["id", "created_at"]


class EventTypeViewSet(HeraldAPI, OwnedQuerysetMixin, viewsets.ModelViewSet):
    """The catalog of event types you publish: what subscribers (and your tenants) choose from; with
    `validate_payloads`, a publish of that type whose payload does not match the schema is refused (400), or, with
    `on_mismatch` "record", published with the mismatch recorded on the message."""

    queryset = EventType.objects.all()
    serializer_class = EventTypeSerializer
    tenant_path = "open"
    tenant_actions = frozenset({"list", "retrieve"})
    filterset_fields = ["name", "deprecated"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        serializer.instance = event_types.event_type_create(owner=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer):
        serializer.instance = event_types.event_type_update(event_type=serializer.instance,
                                                            **serializer.validated_data)

    def perform_destroy(self, instance):
        event_types.event_type_delete(event_type=instance)

"""The API of deliveries (read-only, the requester's own): each with its attempts, their request and response
excerpts as stored (never a secret), and `retry`, attempting one now."""

from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from delivery.engine.accounts import recovery
from delivery.models import Attempt, Delivery
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.filters import DeliveryFilter
from delivery.web.api.ownership import OwnedQuerysetMixin
from delivery.web.api.strict import NoBodySerializer


class AttemptSerializer(serializers.ModelSerializer):
    request_headers = serializers.JSONField(source="recorded.request_headers", read_only=True)
    request_body = serializers.CharField(source="recorded.request_body", read_only=True)
    response_headers = serializers.JSONField(source="recorded.response_headers", read_only=True)
    response_body = serializers.CharField(source="recorded.response_body", read_only=True)

    class Meta:
        model = Attempt
        fields = ["id", "number", "queue", "started_at", "duration_ms", "request_url", "request_headers",
                  "request_body", "response_status",
                  "response_headers", "response_body", "error_class", "error_detail", "outcome"]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer):
    endpoint = serializers.CharField(source="endpoint.url", read_only=True)

    class Meta:
        model = Delivery
        fields = ["id", "message", "subscription", "endpoint", "status", "attempt_count", "next_attempt_at",
                  "first_attempt_at", "last_attempt_at", "delivered_at", "dead_letter_reason", "finished_at",
                  "ordering_key", "replay", "created_at"]
        read_only_fields = fields


class DeliveryDetailSerializer(DeliverySerializer):
    attempts = AttemptSerializer(many=True, read_only=True)

    class Meta(DeliverySerializer.Meta):
        fields = DeliverySerializer.Meta.fields + ["attempts"]
        read_only_fields = fields


class DeliveryViewSet(HeraldAPI, OwnedQuerysetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    """Deliveries with their attempts. `retry` attempts one now."""

    queryset = Delivery.objects.select_related("endpoint").prefetch_related("attempts__exchange")
    owner_path = "subscription__topic__owner"
    tenant_path = "subscription__tenant"
    tenant_actions = frozenset({"list", "retrieve", "retry"})
    serializer_class = DeliverySerializer
    filterset_class = DeliveryFilter
    ordering_fields = ["id", "created_at", "next_attempt_at", "last_attempt_at"]

    def get_serializer_class(self):
        return DeliveryDetailSerializer if self.action == "retrieve" else self.serializer_class

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def retry(self, request, pk=None):
        """Attempt this delivery now (recorded as a `manual` attempt); a dead letter gets a fresh budget."""
        delivery = recovery.delivery_retry_now(delivery=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)

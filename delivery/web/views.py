from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.engine import recovery
from delivery.models import Delivery, Message
from delivery.rules import policy as policies
from delivery.web.filters import DeliveryFilter, MessageFilter
from delivery.web.ownership import OwnedQuerysetMixin
from delivery.web.serializers import (
    DeliveryDetailSerializer,
    DeliverySerializer,
    MessageDetailSerializer,
    MessageSerializer,
    PolicyPreviewSerializer,
)


class ReadOnlyViewSet(OwnedQuerysetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    detail_serializer_class = None

    def get_serializer_class(self):
        if self.action == "retrieve" and self.detail_serializer_class:
            return self.detail_serializer_class
        return self.serializer_class


class MessageViewSet(ReadOnlyViewSet):
    queryset = Message.objects.select_related("topic").prefetch_related("deliveries__endpoint")
    owner_path = "topic__owner"
    serializer_class = MessageSerializer
    detail_serializer_class = MessageDetailSerializer
    filterset_class = MessageFilter
    ordering_fields = ["published_at"]


class DeliveryViewSet(ReadOnlyViewSet):
    """Deliveries with their attempts. `retry` attempts one now."""

    queryset = Delivery.objects.select_related("endpoint").prefetch_related("attempts")
    owner_path = "subscription__topic__owner"
    serializer_class = DeliverySerializer
    detail_serializer_class = DeliveryDetailSerializer
    filterset_class = DeliveryFilter
    ordering_fields = ["id", "created_at", "next_attempt_at", "last_attempt_at"]

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Attempt this delivery now (recorded as a `manual` attempt); a dead letter gets a fresh budget."""
        delivery = recovery.delivery_retry_now(delivery=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class PolicyPreviewView(APIView):
    """The effective policy of a document and the schedule it produces (no jitter; jitter bounds beside)."""

    @extend_schema(request=PolicyPreviewSerializer, responses={200: dict})
    def post(self, request):
        serializer = PolicyPreviewSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        effective = policies.parse(serializer.validated_data["delivery_policy"])
        rows = effective.schedule()
        for row in rows:
            row["delay_min"] = round(row["delay"] * (1 - effective.jitter), 3)
            row["delay_max"] = round(row["delay"] * (1 + effective.jitter), 3)
        return Response({
            "effective_delivery_policy": effective.document,
            "max_attempts": effective.max_attempts,
            "max_age_seconds": effective.max_age_seconds,
            "jitter": effective.jitter,
            "schedule": rows,
            "total_seconds": rows[-1]["offset"],
        })

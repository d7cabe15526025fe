"""The API of endpoints: a URL's health, and enabling it by hand once fixed. Every endpoint is the requester's own
(another owner's, or another tenant's, is a 404)."""

from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from delivery.engine.state import health
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.ownership import OwnedQuerysetMixin
from delivery.web.api.strict import NoBodySerializer
from delivery.web.api.subscription_serializers import (
    EndpointDetailSerializer,
    EndpointSerializer,
)
from subscriptions.models import Endpoint


class EndpointViewSet(HeraldAPI, OwnedQuerysetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    """URL health. `enable` lifts a disable or a freeze by hand: counters reset, held deliveries go out at once."""

    queryset = Endpoint.objects.all()
    tenant_path = "tenant"
    tenant_actions = frozenset({"list", "retrieve", "enable"})  # a tenant fixes its endpoint, then lifts the freeze
    filterset_fields = ["state", "url"]
    ordering_fields = ["id", "consecutive_failures", "last_failure_at"]

    serializer_class = EndpointDetailSerializer

    def get_serializer_class(self):
        return EndpointSerializer if self.action == "list" else self.serializer_class

    @extend_schema(request=None, responses={200: EndpointDetailSerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def enable(self, request, pk=None):
        endpoint = health.endpoint_enable(endpoint=self.get_object(), actor=request.user)
        return Response(EndpointDetailSerializer(endpoint).data)

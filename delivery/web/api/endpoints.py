"""The API of endpoints: a URL's health, its recent transitions, and enabling it by hand once fixed. Every endpoint
is the requester's own (another owner's, or another tenant's, is a 404)."""

from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from delivery.engine.state import health
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.ownership import OwnedQuerysetMixin
from delivery.web.api.strict import NoBodySerializer
from subscriptions.models import Endpoint, EndpointTransition


class EndpointTransitionSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None, read_only=True)

    class Meta:
        model = EndpointTransition
        fields = ["at", "from_state", "to_state", "reason", "consecutive_failures", "window_attempts",
                  "window_failures", "actor"]
        read_only_fields = fields


class EndpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = Endpoint
        fields = ["id", "url", "state", "state_reason", "state_changed_at", "consecutive_failures",
                  "window_attempts", "window_failures", "last_success_at", "last_failure_at", "next_probe_at",
                  "created_at"]
        read_only_fields = fields


class EndpointDetailSerializer(EndpointSerializer):
    transitions = serializers.SerializerMethodField()

    class Meta(EndpointSerializer.Meta):
        fields = EndpointSerializer.Meta.fields + ["transitions"]
        read_only_fields = fields

    def get_transitions(self, obj) -> list[dict]:
        recent = obj.transitions.select_related("actor").order_by("-at", "-id")[:50]
        return EndpointTransitionSerializer(recent, many=True).data


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

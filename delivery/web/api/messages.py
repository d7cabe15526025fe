"""The API of messages (read-only, the requester's own), with each message's fan-out report: "why did endpoint X not
get event Y", one row per subscription of its topic."""

from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action

from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Message
from delivery.web import fanout_report
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.deliveries import DeliverySerializer
from delivery.web.api.filters import MessageFilter
from delivery.web.api.ownership import OwnedQuerysetMixin

FANOUT_SHOWN = 100


class MessageSerializer(serializers.ModelSerializer):
    topic_name = serializers.CharField(source="topic.name", read_only=True)
    tenant = serializers.SerializerMethodField(
        help_text="The tenant (external id) it was published for: its subscriptions and the owner's own receive it, "
                  "or only the owner's own while `tenant_registered` is false. Empty: the owner's own "
                  "subscriptions only, or every tenant's with `broadcast`.")
    tenant_registered = serializers.SerializerMethodField(
        help_text="Whether the owner had the tenant when it was published (false: kept for it, delivered to the "
                  "owner's own subscriptions only; a replay reaches it once it registers).")

    class Meta:
        model = Message
        fields = ["id", "topic", "topic_name", "event_type", "subject", "payload", "payload_is_text", "attributes",
                  "published_at", "idempotency_key", "ordering_key", "tenant", "tenant_registered", "broadcast",
                  "schema_mismatch"]
        read_only_fields = fields

    def get_tenant(self, message) -> str | None:
        if message.tenant_id is not None:
            return message.tenant.external_id
        return message.tenant_external_id or None

    def get_tenant_registered(self, message) -> bool | None:
        if message.tenant_id is None and not message.tenant_external_id:
            return None
        return message.tenant_id is not None


class LastErrorSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    at = serializers.DateTimeField()
    status = serializers.IntegerField(allow_null=True, help_text="The endpoint's HTTP status, if it answered.")
    error_class = serializers.CharField()
    detail = serializers.CharField()


class FanoutDeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    attempt_count = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)
    dead_letter_reason = serializers.CharField()
    last_error = LastErrorSerializer(allow_null=True)


class FanoutDecisionSerializer(serializers.Serializer):
    """What publishing decided for one subscription of the topic, and where its delivery stands."""

    subscription = serializers.IntegerField()
    endpoint = serializers.CharField()
    endpoint_id = serializers.IntegerField()
    subscription_status = serializers.CharField(help_text="The subscription's status now.")
    endpoint_state = serializers.CharField(help_text="The endpoint's state now.")
    tenant = serializers.CharField(allow_null=True, help_text="The tenant (external id) whose subscription it is; "
                                                              "null: the owner's own.")
    outcome = serializers.ChoiceField(choices=fanout_report.OUTCOMES)
    reason = serializers.CharField(help_text="The decision or the delivery's state, in words.")
    fix = serializers.CharField(help_text="What an operator can do about it (empty when nothing is needed).")
    delivery = FanoutDeliverySerializer(allow_null=True)


class MessageDetailSerializer(MessageSerializer):
    deliveries = serializers.SerializerMethodField(help_text=(
        f"The message's first {FANOUT_SHOWN} deliveries (all of them, filterable, at `/api/deliveries/?message=`)."))
    fanout_summary = serializers.SerializerMethodField(help_text="How many subscriptions had each outcome.")
    fanout = serializers.SerializerMethodField(help_text=(
        f"Every subscription of the topic with its outcome (the first {FANOUT_SHOWN}; all of them, filterable, at "
        "`/api/messages/{id}/fanout/`)."))

    class Meta(MessageSerializer.Meta):
        fields = MessageSerializer.Meta.fields + ["fanout_summary", "fanout", "deliveries"]
        read_only_fields = fields

    @extend_schema_field(DeliverySerializer(many=True))
    def get_deliveries(self, message):
        first = message.deliveries.select_related("endpoint").order_by("id")
        return DeliverySerializer(first[:FANOUT_SHOWN], many=True).data

    def get_fanout_summary(self, message) -> dict[str, int]:
        return fanout_report.counts(message)

    @extend_schema_field(FanoutDecisionSerializer(many=True))
    def get_fanout(self, message):
        rows = fanout_report.decisions(message, fanout_report.subscriptions(message)[:FANOUT_SHOWN])
        return FanoutDecisionSerializer(rows, many=True).data


class MessageViewSet(HeraldAPI, OwnedQuerysetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                     viewsets.GenericViewSet):
    """Published messages. A message's page lists every subscription of its topic with what publishing decided
    (delivery created, filtered out and by which attribute, not confirmed, paused, subscribed after) and where the
    delivery stands; `fanout` pages through all of them."""

    queryset = Message.objects.select_related("topic", "tenant")
    owner_path = "topic__owner"
    serializer_class = MessageSerializer
    filterset_class = MessageFilter
    ordering_fields = ["published_at"]

    def get_serializer_class(self):
        return MessageDetailSerializer if self.action == "retrieve" else self.serializer_class

    @extend_schema(
        parameters=[OpenApiParameter("outcome", enum=fanout_report.OUTCOMES, required=False),
                    OpenApiParameter("subscription", int, required=False)],
        responses={200: FanoutDecisionSerializer(many=True)}, paginated=True)
    @action(detail=True, methods=["get"], filter_backends=[], serializer_class=FanoutDecisionSerializer)
    def fanout(self, request, pk=None):
        """Why each subscription of the topic did or did not get this message, paginated; `?subscription=` answers
        for one, `?outcome=` lists one kind (e.g. `filtered_out`)."""
        message = self.owned_object()
        outcome = request.query_params.get("outcome") or None
        if outcome is not None and outcome not in fanout_report.OUTCOMES:
            raise ApplicationError(f"Use one of: {', '.join(fanout_report.OUTCOMES)}.", field="outcome")
        raw = request.query_params.get("subscription") or None
        if raw is not None and not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
            raise ApplicationError("A subscription id (a positive integer).", field="subscription")
        shown = fanout_report.subscriptions(message, subscription_id=int(raw) if raw else None, outcome=outcome)
        rows = fanout_report.decisions(message, self.paginate_queryset(shown))
        response = self.get_paginated_response(FanoutDecisionSerializer(rows, many=True).data)
        response.data["schema_mismatch"] = message.schema_mismatch  # published all the same (on_mismatch record)
        return response

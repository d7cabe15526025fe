"""What the API shows of messages, deliveries and attempts (request and response excerpts as stored, never a
secret), the fan-out report's rows, and the policy preview's input."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from delivery.models import Attempt, Delivery, Message
from delivery.web import fanout_report
from delivery.web.api.strict import StrictInput

FANOUT_SHOWN = 100


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


class PolicyPreviewSerializer(StrictInput, serializers.Serializer):
    delivery_policy = serializers.JSONField(
        help_text="A policy document or a preset name: a subscription's, or a topic's (SNS's topic form "
                  "{\"http\": {\"defaultHealthyRetryPolicy\": …}} too).")
    topic_delivery_policy = serializers.JSONField(
        required=False, help_text="A topic's policy to preview `delivery_policy` over (as its subscription).")

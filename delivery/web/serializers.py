from rest_framework import serializers

from delivery.models import Attempt, Delivery, Message


class AttemptSerializer(serializers.ModelSerializer):
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
                  "created_at"]
        read_only_fields = fields


class DeliveryDetailSerializer(DeliverySerializer):
    attempts = AttemptSerializer(many=True, read_only=True)

    class Meta(DeliverySerializer.Meta):
        fields = DeliverySerializer.Meta.fields + ["attempts"]
        read_only_fields = fields


class MessageSerializer(serializers.ModelSerializer):
    topic_name = serializers.CharField(source="topic.name", read_only=True)

    class Meta:
        model = Message
        fields = ["id", "topic", "topic_name", "event_type", "subject", "payload", "payload_is_text", "attributes",
                  "published_at", "idempotency_key"]
        read_only_fields = fields


class MessageDetailSerializer(MessageSerializer):
    deliveries = DeliverySerializer(many=True, read_only=True)

    class Meta(MessageSerializer.Meta):
        fields = MessageSerializer.Meta.fields + ["deliveries"]
        read_only_fields = fields


class PolicyPreviewSerializer(serializers.Serializer):
    delivery_policy = serializers.JSONField(help_text="A policy document or a preset name.")

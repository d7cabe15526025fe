"""API filters for messages and deliveries."""

from datetime import UTC

from django_filters.rest_framework import DateTimeFilter, FilterSet

from .models import Delivery, Message


class UTCDateTimeFilter(DateTimeFilter):
    """Compares in UTC: any offset Python accepts (up to ±23:59) is converted before it reaches the database,
    which accepts only ±15:59."""

    def filter(self, qs, value):
        return super().filter(qs, value.astimezone(UTC) if value is not None else None)


class MessageFilter(FilterSet):
    published_after = UTCDateTimeFilter(field_name="published_at", lookup_expr="gte")
    published_before = UTCDateTimeFilter(field_name="published_at", lookup_expr="lt")

    class Meta:
        model = Message
        fields = ["topic", "event_type", "published_after", "published_before"]


class DeliveryFilter(FilterSet):
    created_after = UTCDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UTCDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Delivery
        fields = ["subscription", "status", "message", "dead_letter_reason", "endpoint", "created_after",
                  "created_before"]

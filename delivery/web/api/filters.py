"""API filters for messages and deliveries."""

from datetime import UTC

from django import forms
from django.db.models import Q
from django_filters.rest_framework import CharFilter, DateTimeFilter, FilterSet, ModelChoiceFilter, NumberFilter

from delivery.models import Delivery, Message
from delivery.web.api.ownership import owned_choices
from subscriptions.models import Endpoint, Subscription, Topic


class UTCDateTimeField(forms.DateTimeField):
    """Converts to UTC while cleaning: any offset Python accepts (up to ±23:59) becomes one the database accepts
    (±15:59), and a time that has no UTC equivalent (year 1 at +01:00) is a clear error, not a crash."""

    def clean(self, value):
        cleaned = super().clean(value)
        if cleaned is None:
            return None
        try:
            return cleaned.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("This time is outside the supported range.", code="out_of_range") from None


class UTCDateTimeFilter(DateTimeFilter):
    field_class = UTCDateTimeField


def tenant_filter(path: str = "tenant") -> CharFilter:
    return CharFilter(field_name=f"{path}__external_id", help_text="A tenant's external id: its objects only.")


class MessageFilter(FilterSet):
    topic = ModelChoiceFilter(queryset=owned_choices(Topic))
    tenant = CharFilter(method="for_tenant", help_text="A tenant's external id: the messages published for it, also "
                                                        "before it was registered.")
    published_after = UTCDateTimeFilter(field_name="published_at", lookup_expr="gte")
    published_before = UTCDateTimeFilter(field_name="published_at", lookup_expr="lt")

    class Meta:
        model = Message
        fields = ["topic", "event_type", "published_after", "published_before", "tenant"]

    def for_tenant(self, queryset, name, value):
        return queryset.filter(Q(tenant__external_id=value) | Q(tenant_external_id=value))


class DeliveryFilter(FilterSet):
    subscription = ModelChoiceFilter(queryset=owned_choices(Subscription, "topic__owner", "tenant"))
    message = ModelChoiceFilter(queryset=owned_choices(Message, "topic__owner"))
    endpoint = ModelChoiceFilter(queryset=owned_choices(Endpoint, "owner", "tenant"))
    created_after = UTCDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UTCDateTimeFilter(field_name="created_at", lookup_expr="lt")
    replay = NumberFilter(field_name="replay_id", help_text="The deliveries of one replay.")
    tenant = tenant_filter()

    class Meta:
        model = Delivery
        fields = ["subscription", "status", "message", "dead_letter_reason", "endpoint", "created_after",
                  "created_before", "replay", "ordering_key", "tenant"]

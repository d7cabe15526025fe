from django.contrib import admin

from .models import Attempt, Delivery, Message


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    fields = ["number", "queue", "started_at", "duration_ms", "response_status", "error_class", "outcome"]
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "topic", "event_type", "subject", "published_at"]
    list_filter = ["event_type", "published_at"]
    search_fields = ["=id", "subject", "topic__name", "idempotency_key"]
    list_select_related = ["topic"]


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ["id", "message", "subscription", "endpoint", "status", "attempt_count", "next_attempt_at",
                    "dead_letter_reason", "delivered_at"]
    list_filter = ["status", "dead_letter_reason", "endpoint__state", "created_at"]
    search_fields = ["=message__id", "endpoint__url", "subscription__topic__name"]
    list_select_related = ["message", "subscription__topic", "subscription__endpoint", "endpoint"]
    raw_id_fields = ["message", "subscription", "endpoint"]
    inlines = [AttemptInline]


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ["id", "delivery", "number", "queue", "started_at", "duration_ms", "response_status",
                    "error_class", "outcome"]
    list_filter = ["outcome", "error_class", "queue", "response_status", "started_at"]
    search_fields = ["request_url", "=delivery__message__id"]
    raw_id_fields = ["delivery"]

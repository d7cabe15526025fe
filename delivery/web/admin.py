import json

from django.contrib import admin
from django.utils.html import format_html

from delivery.engine import recovery
from delivery.models import Attempt, Delivery, Message
from delivery.web.subscription_admin import run_service


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
    actions = ["retry_now", "dead_letter"]
    fields = ["message", "subscription", "endpoint_link", "status", "dead_letter_reason", "attempt_count",
              "next_attempt_at", "first_attempt_at", "last_attempt_at", "delivered_at", "finished_at",
              "budget_attempts", "budget_started_at", "lease_until"]
    readonly_fields = ["endpoint_link"]

    @admin.display(description="endpoint health")
    def endpoint_link(self, obj):
        return format_html('<a href="/admin/subscriptions/endpoint/{}/change/">{}</a> ({})', obj.endpoint_id,
                           obj.endpoint.url, obj.endpoint.state)

    @admin.action(description="Retry selected deliveries now (manual attempt; dead letters get a fresh budget)")
    def retry_now(self, request, queryset):
        run_service(self, request, queryset, recovery.delivery_retry_now, "Queued {} deliveries for a manual attempt.")

    @admin.action(description="Dead-letter selected pending deliveries (stop retrying)")
    def dead_letter(self, request, queryset):
        run_service(self, request, queryset, recovery.delivery_dead_letter, "Dead-lettered {} deliveries.")


def preformatted(value) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False) if isinstance(value, dict) else (value or "")
    return format_html('<pre style="white-space: pre-wrap; max-width: 900px">{}</pre>', text or "—")


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ["id", "delivery", "number", "queue", "started_at", "duration_ms", "response_status",
                    "error_class", "outcome"]
    list_filter = ["outcome", "error_class", "queue", "response_status", "started_at"]
    search_fields = ["request_url", "=delivery__message__id"]
    raw_id_fields = ["delivery"]
    def has_delete_permission(self, request, obj=None):
        return False  # attempt logs are read-only

    fields = ["delivery", "number", "queue", "outcome", "started_at", "duration_ms", "request_url",
              "request_headers_view", "request_body_view", "response_status", "response_headers_view",
              "response_body_view", "error_class", "error_detail"]
    readonly_fields = fields

    @admin.display(description="request headers")
    def request_headers_view(self, obj):
        return preformatted(obj.request_headers)

    @admin.display(description="request body (first 4 KiB)")
    def request_body_view(self, obj):
        return preformatted(obj.request_body)

    @admin.display(description="response headers")
    def response_headers_view(self, obj):
        return preformatted(obj.response_headers)

    @admin.display(description="response body (first 4 KiB)")
    def response_body_view(self, obj):
        return preformatted(obj.response_body)

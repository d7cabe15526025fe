"""The operator console's pages of messages, deliveries and attempts: read-only lists and details with the
fan-out report, request and response excerpts, and the retry-now and stop-retrying buttons."""

import json

from django.contrib import admin
from django.db import router, transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from delivery.engine.accounts import recovery
from delivery.models import Attempt, Delivery, Message
from delivery.rules.vocabulary import DeliveryStatus
from delivery.web import fanout_report
from delivery.web.console.actions import run_service
from delivery.web.console.badges import endpoint_link, status_badge
from delivery.web.console.buttons import Button, ButtonsMixin

FANOUT_SHOWN = 200


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records of what happened: viewed, never edited or deleted by hand (retention purges them)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
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


def preformatted(value) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False) if isinstance(value, (dict, list)) else (value or "")
    return format_html('<pre style="white-space: pre-wrap; max-width: 900px">{}</pre>', text or "—")


@admin.register(Message)
class MessageAdmin(ButtonsMixin, ReadOnlyAdmin):
    """A message and, for every subscription of its topic, what publishing decided and where the delivery stands."""

    list_display = ["id", "topic", "event_type", "subject", "published_at"]
    list_filter = ["event_type", "published_at"]
    search_fields = ["=id", "subject", "topic__name", "idempotency_key", "=tenant_external_id"]
    list_select_related = ["topic"]
    fields = ["id", "topic", "event_type", "subject", "published_at", "idempotency_key", "tenant",
              "tenant_external_id", "broadcast",
              "schema_mismatch", "attributes_view", "payload_view", "fanout_view"]
    readonly_fields = fields

    @admin.display(description="attributes")
    def attributes_view(self, obj):
        return preformatted(obj.attributes)

    @admin.display(description="payload")
    def payload_view(self, obj):
        return preformatted(obj.payload)

    @admin.display(description="fan-out: every subscription of the topic")
    def fanout_view(self, obj):
        rows = fanout_report.decisions(obj, fanout_report.subscriptions(obj)[:FANOUT_SHOWN])
        summary = fanout_report.counts(obj)
        total = sum(summary.values())
        return render_to_string("admin/herald/fanout.html", {
            "rows": rows, "summary": summary, "more": total > FANOUT_SHOWN, "total": total, "message_id": obj.id})


def retry_delivery(request, delivery):
    recovery.delivery_retry_now(delivery=delivery)
    return f"Delivery {delivery.id} will be attempted now (a manual attempt)."


def stop_delivery(request, delivery):
    recovery.delivery_dead_letter(delivery=delivery)
    return f"Delivery {delivery.id} was dead-lettered by hand; it can be redriven later."


@admin.register(Delivery)
class DeliveryAdmin(ButtonsMixin, ReadOnlyAdmin):
    list_display = ["id", "status_badge", "topic", "endpoint_url", "attempt_count", "next_attempt_at",
                    "last_attempt_at", "dead_letter_reason"]
    list_filter = ["status", "dead_letter_reason", "endpoint__state", "created_at"]
    search_fields = ["=message__id", "endpoint__url", "subscription__topic__name"]
    list_select_related = ["subscription__topic", "endpoint"]
    inlines = [AttemptInline]
    actions = ["retry_now", "dead_letter"]
    fieldsets = [
        ("Where it stands", {"fields": ["status_badge", "summary", "attempt_count", "next_attempt_at",
                                        "last_error", "delivered_at", "dead_letter_reason", "finished_at"]}),
        ("What and where to", {"fields": ["message_link", "subscription_link", "endpoint_link"]}),
        ("Internals", {"classes": ["collapse"], "fields": [
            "created_at", "first_attempt_at", "last_attempt_at", "budget_attempts", "budget_started_at",
            "lease_until"]}),
    ]
    readonly_fields = [field for _, options in fieldsets for field in options["fields"]]
    buttons = (
        Button("retry", "Retry now", retry_delivery,
               shown=lambda d: d.status in (DeliveryStatus.PENDING, DeliveryStatus.DEAD_LETTERED,
                                            DeliveryStatus.DROPPED),
               title="Attempt it now (recorded as a manual attempt); a dead letter gets a fresh budget."),
        Button("stop", "Stop retrying", stop_delivery, shown=lambda d: d.status == DeliveryStatus.PENDING,
               title="Dead-letter it (reason: manual)."),
    )

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return status_badge(obj.status)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The delivery and its attempts as of one moment: a worker recording a try while the page is read (right
        after "Retry now", say) would otherwise show the old status beside the new attempt."""
        with transaction.atomic(using=router.db_for_read(self.model)):
            connection = transaction.get_connection(router.db_for_read(self.model))
            if connection.vendor == "postgresql":  # SQLite's transactions are serializable already
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            response = super().change_view(request, object_id, form_url, extra_context)
            if hasattr(response, "render"):  # a TemplateResponse renders later, outside this transaction: now
                response.render()
            return response

    @admin.display(description="topic", ordering="subscription__topic__name")
    def topic(self, obj):
        return obj.subscription.topic.name

    @admin.display(description="endpoint", ordering="endpoint__url")
    def endpoint_url(self, obj):
        url = obj.endpoint.url
        return url if len(url) <= 60 else url[:57] + "…"

    def _row(self, obj):
        """This delivery's row of its message's fan-out report, read once per page (two fields show it)."""
        if not hasattr(obj, "_herald_row"):
            obj._herald_row = fanout_report.decisions(
                obj.message, fanout_report.subscriptions(obj.message, subscription_id=obj.subscription_id))[0]
        return obj._herald_row

    @admin.display(description="in words")
    def summary(self, obj):
        return self._row(obj)["reason"]

    @admin.display(description="last error")
    def last_error(self, obj):
        error = self._row(obj)["delivery"]["last_error"]
        if error is None:
            return "—"
        return format_html("attempt {} at {}: {} {}", error["attempt"], error["at"].strftime("%Y-%m-%d %H:%M:%S"),
                           f"HTTP {error['status']}" if error["status"] else error["error_class"], error["detail"])

    @admin.display(description="message")
    def message_link(self, obj):
        return format_html('<a href="{}">{}</a> ({}, published {})',
                           reverse("admin:herald_delivery_message_change", args=[obj.message_id]), obj.message_id,
                           obj.message.event_type, obj.message.published_at.strftime("%Y-%m-%d %H:%M:%S"))

    @admin.display(description="subscription")
    def subscription_link(self, obj):
        return format_html('<a href="{}">#{} {}</a> ({})',
                           reverse("admin:herald_subscriptions_subscription_change", args=[obj.subscription_id]),
                           obj.subscription_id, obj.subscription.topic.name, obj.subscription.status)

    @admin.display(description="endpoint")
    def endpoint_link(self, obj):
        return endpoint_link(obj.endpoint)

    @admin.action(description="Retry selected deliveries now (manual attempt; dead letters get a fresh budget)")
    def retry_now(self, request, queryset):
        run_service(self, request, queryset, recovery.delivery_retry_now, "Queued {} deliveries for a manual attempt.")

    @admin.action(description="Dead-letter selected pending deliveries (stop retrying)")
    def dead_letter(self, request, queryset):
        run_service(self, request, queryset, recovery.delivery_dead_letter, "Dead-lettered {} deliveries.")


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ["id", "outcome", "response_status", "error_class", "delivery_link", "number", "started_at",
                    "duration_ms", "queue"]
    list_filter = ["outcome", "error_class", "queue", "response_status", "started_at"]
    search_fields = ["request_url", "=delivery__message__id"]
    fields = ["delivery_link", "number", "queue", "outcome", "started_at", "duration_ms", "request_url",
              "request_headers_view", "request_body_view", "response_status", "response_headers_view",
              "response_body_view", "error_class", "error_detail"]
    readonly_fields = fields

    @admin.display(description="delivery", ordering="delivery_id")
    def delivery_link(self, obj):
        return format_html('<a href="{}">#{}</a>',
                           reverse("admin:herald_delivery_delivery_change", args=[obj.delivery_id]), obj.delivery_id)

    @admin.display(description="request headers")
    def request_headers_view(self, obj):
        return preformatted(obj.recorded.request_headers)

    @admin.display(description="request body (first 4 KiB)")
    def request_body_view(self, obj):
        return preformatted(obj.recorded.request_body)

    @admin.display(description="response headers")
    def response_headers_view(self, obj):
        return preformatted(obj.recorded.response_headers)

    @admin.display(description="response body (first 4 KiB)")
    def response_body_view(self, obj):
        return preformatted(obj.recorded.response_body)

"""The endpoint's admin page: its health, subscriptions, recent attempts and transitions; health changes only through
the buttons and actions (which record why)."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from delivery.engine.state import health
from delivery.models import Attempt
from delivery.web.console.actions import run_service
from delivery.web.console.badges import state_badge
from delivery.web.console.buttons import Button, ButtonsMixin
from subscriptions.models import Endpoint, EndpointTransition, Subscription
from subscriptions.states import EndpointState


class TransitionInline(admin.TabularInline):
    model = EndpointTransition
    extra = 0
    can_delete = False
    fields = ["at", "from_state", "to_state", "reason", "consecutive_failures", "window_attempts",
              "window_failures", "actor"]
    readonly_fields = fields
    ordering = ["-at", "-id"]

    def has_add_permission(self, request, obj=None):
        return False


class SubscriptionInline(admin.TabularInline):
    model = Subscription
    extra = 0
    can_delete = False
    fields = ["topic", "status", "raw_message_delivery", "created_at"]
    readonly_fields = fields
    show_change_link = True
    verbose_name_plural = "subscriptions to this endpoint"

    def has_add_permission(self, request, obj=None):
        return False


def _enable(request, endpoint):
    health.endpoint_enable(endpoint=endpoint, actor=request.user)
    return "Enabled: counters reset, held deliveries released."


def _disable(request, endpoint):
    health.endpoint_disable(endpoint=endpoint, actor=request.user)
    return "Disabled: one probe per interval until it answers."


def _freeze(request, endpoint):
    health.endpoint_freeze(endpoint=endpoint, actor=request.user)
    return "Frozen: nothing is sent until it is enabled."


@admin.register(Endpoint)
class EndpointAdmin(ButtonsMixin, admin.ModelAdmin):
    list_display = ["id", "url", "state_badge", "consecutive_failures", "window_failures", "window_attempts",
                    "last_failure_at", "owner"]
    list_filter = ["state"]
    search_fields = ["url", "owner__username"]
    fields = ["url", "owner", "state_badge", "state_reason", "state_changed_at", "next_probe_at",
              "consecutive_failures", "window_attempts", "window_failures", "last_success_at", "last_failure_at",
              "created_at", "recent_attempts"]
    readonly_fields = fields  # health changes only through the buttons and actions, which record why
    inlines = [SubscriptionInline, TransitionInline]
    actions = ["enable", "disable", "freeze"]
    read_only_page = True
    buttons = (
        Button("enable", "Enable (unfreeze)", _enable, shown=lambda e: e.state != EndpointState.ACTIVE,
               title="Active again: counters reset, held deliveries released."),
        Button("disable", "Disable", _disable, shown=lambda e: e.state == EndpointState.ACTIVE),
        Button("freeze", "Freeze", _freeze, shown=lambda e: e.state != EndpointState.FROZEN),
    )

    def has_add_permission(self, request):
        return False  # endpoints come into being with their first subscription

    def has_delete_permission(self, request, obj=None):
        return False  # nor deleted by hand: its deliveries (some perhaps being sent) would go with it

    @admin.display(description="recent attempts")
    def recent_attempts(self, obj):
        attempts = (Attempt.objects.filter(delivery__endpoint=obj).order_by("-started_at", "-id")
                    .values_list("id", "delivery_id", "started_at", "outcome", "response_status", "error_class",
                                 "duration_ms")[:20])
        if not attempts:
            return "No attempts yet."
        rows = format_html_join("", '<tr><td><a href="{}">{}</a></td><td><a href="{}">#{}</a></td>'
                                    "<td>{}</td><td>{}</td><td>{} ms</td></tr>", (
            (reverse("admin:herald_delivery_attempt_change", args=[aid]), started.strftime("%Y-%m-%d %H:%M:%S"),
             reverse("admin:herald_delivery_delivery_change", args=[did]), did, outcome,
             status if status else (error or "—"), duration)
            for aid, did, started, outcome, status, error, duration in attempts))
        return format_html('<table class="herald-table" id="herald-recent-attempts"><thead><tr><th>started</th>'
                           "<th>delivery</th><th>outcome</th><th>status / error</th><th>duration</th></tr></thead>"
                           "<tbody>{}</tbody></table>", rows)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return state_badge(obj.state)

    @admin.action(description="Enable (unfreeze) selected endpoints: reset counters, release held deliveries")
    def enable(self, request, queryset):
        run_service(self, request, queryset, health.endpoint_enable, "Enabled {} endpoint(s).", actor=request.user)

    @admin.action(description="Disable selected endpoints (probe only)")
    def disable(self, request, queryset):
        run_service(self, request, queryset, health.endpoint_disable, "Disabled {} endpoint(s).", actor=request.user)

    @admin.action(description="Freeze selected endpoints (send nothing)")
    def freeze(self, request, queryset):
        run_service(self, request, queryset, health.endpoint_freeze, "Froze {} endpoint(s).", actor=request.user)

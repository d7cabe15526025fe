from django.contrib import admin, messages
from django.utils.html import format_html

from delivery import health

from .models import Endpoint, EndpointTransition, Subscription, Topic

STATE_COLOURS = {"active": "#2e7d32", "disabled": "#ef6c00", "frozen": "#1565c0"}


def state_badge(state: str):
    return format_html('<span class="herald-badge" style="background:{};color:#fff;padding:2px 8px;'
                       'border-radius:10px;font-weight:600">{}</span>', STATE_COLOURS.get(state, "#555"), state)


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "owner", "created_at"]
    search_fields = ["name", "description", "owner__username"]
    list_filter = ["created_at"]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["id", "topic", "endpoint", "status", "raw_message_delivery", "created_at"]
    list_filter = ["status", "raw_message_delivery", "endpoint__state"]
    search_fields = ["endpoint__url", "topic__name"]
    list_select_related = ["topic", "endpoint"]
    exclude = ["secret", "previous_secret", "confirmation_token_hash"]  # never shown; rotate through the API
    readonly_fields = ["confirmed_at", "confirmation_expires_at", "previous_secret_expires_at", "created_at",
                       "updated_at"]
    raw_id_fields = ["endpoint", "topic"]


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


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ["id", "url", "owner", "state_badge", "consecutive_failures", "window_attempts",
                    "window_failures", "last_success_at", "last_failure_at", "state_changed_at"]
    list_filter = ["state"]
    search_fields = ["url", "owner__username"]
    readonly_fields = ["state", "state_reason", "state_changed_at", "next_probe_at", "consecutive_failures",
                       "window_attempts", "window_failures", "last_success_at", "last_failure_at", "created_at"]
    inlines = [TransitionInline]
    actions = ["enable", "disable", "freeze"]

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return state_badge(obj.state)

    def _apply(self, request, queryset, service, verb):
        for endpoint in queryset:
            service(endpoint=endpoint, actor=request.user)
        self.message_user(request, f"{verb} {queryset.count()} endpoint(s).", messages.SUCCESS)

    @admin.action(description="Enable (unfreeze) selected endpoints: reset counters, release held deliveries")
    def enable(self, request, queryset):
        self._apply(request, queryset, health.endpoint_enable, "Enabled")

    @admin.action(description="Disable selected endpoints (probe only)")
    def disable(self, request, queryset):
        self._apply(request, queryset, health.endpoint_disable, "Disabled")

    @admin.action(description="Freeze selected endpoints (send nothing)")
    def freeze(self, request, queryset):
        self._apply(request, queryset, health.endpoint_freeze, "Froze")

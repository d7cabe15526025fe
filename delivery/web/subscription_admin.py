from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.utils.html import format_html, format_html_join

from delivery.engine import health, recovery
from delivery.engine.effective import policy_for, subscription_policy
from delivery.engine.errors import ApplicationError
from delivery.engine.subscribing import validate_policy
from delivery.rules.policy import PolicyError
from delivery.rules.vocabulary import DeliveryStatus
from subscriptions.models import Endpoint, EndpointTransition, Subscription, Topic
from subscriptions.states import EndpointState

STATE_COLOURS = {EndpointState.ACTIVE: "#2e7d32", EndpointState.DISABLED: "#ef6c00",
                 EndpointState.FROZEN: "#1565c0"}


def state_badge(state: str):
    return format_html('<span class="herald-badge" style="background:{};color:#fff;padding:2px 8px;'
                       'border-radius:10px;font-weight:600">{}</span>', STATE_COLOURS.get(state, "#555"), state)


def run_service(modeladmin, request, queryset, service, done: str, **kwargs) -> None:
    """An admin action: call `service` once per selected object (as `<model>=obj`), report refusals, count the rest
    (a service that returns a number, such as a redrive, counts that many)."""
    count = 0
    for obj in queryset:
        try:
            result = service(**{obj._meta.model_name: obj}, **kwargs)
        except ApplicationError as exc:
            modeladmin.message_user(request, f"{obj}: {exc.message}", messages.WARNING)
            continue
        count += result if isinstance(result, int) and not isinstance(result, bool) else 1
    modeladmin.message_user(request, done.format(count), messages.SUCCESS)


def schedule_table(policy):
    """The schedule a policy produces, as the admin shows it beside the policy field."""
    rows = policy.schedule()
    shown = rows if len(rows) <= 14 else rows[:10] + [None] + rows[-3:]
    body = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", (
        ("…", "…", "…") if row is None else (row["attempt"], human(row["delay"]), human(row["offset"]))
        for row in shown))
    limits = (f"max attempts {policy.max_attempts or '—'} · time-to-live "
              f"{human(policy.max_age_seconds) if policy.max_age_seconds else '—'} · jitter ±{policy.jitter:.0%}")
    return format_html('<table class="herald-schedule"><thead><tr><th>attempt</th><th>delay</th><th>offset</th>'
                       "</tr></thead><tbody>{}</tbody></table><p class=\"help\">{}</p>", body, limits)


def human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class PolicyValidatingForm(forms.ModelForm):
    """Policies edited in the admin are validated like API writes: every error, nothing stored."""

    def clean_delivery_policy(self):
        document = self.cleaned_data.get("delivery_policy")
        try:
            validate_policy(document)
        except PolicyError as exc:
            raise forms.ValidationError([f"{path}: {reason}" for path, reason in exc.errors]) from None
        return document or None


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    form = PolicyValidatingForm
    list_display = ["id", "name", "owner", "created_at"]
    search_fields = ["name", "description", "owner__username"]
    list_filter = ["created_at"]
    readonly_fields = ["schedule"]

    @admin.display(description="schedule (effective policy for subscriptions without their own)")
    def schedule(self, obj):
        try:
            return schedule_table(policy_for(None, obj.delivery_policy if obj else None))
        except PolicyError as exc:
            return f"invalid policy: {exc}"


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    """Subscriptions are created through the API (secret, confirmation, address checks); here they are inspected,
    their policies tuned, and operated on with the actions."""

    form = PolicyValidatingForm
    list_display = ["id", "topic", "endpoint", "status", "raw_message_delivery", "dead_letters", "created_at"]
    list_filter = ["status", "raw_message_delivery", "endpoint__state"]
    search_fields = ["endpoint__url", "topic__name"]
    list_select_related = ["topic", "endpoint"]
    exclude = ["secret", "previous_secret", "confirmation_token_hash"]  # never shown; rotate through the API
    readonly_fields = ["topic", "endpoint", "status", "schedule", "confirmed_at", "confirmation_expires_at",
                       "previous_secret_expires_at", "created_at", "updated_at"]
    actions = ["redrive", "pause", "resume"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="schedule of the effective policy")
    def schedule(self, obj):
        if obj is None or obj.pk is None:
            return "—"
        try:
            return schedule_table(subscription_policy(obj))
        except PolicyError as exc:
            return f"invalid policy: {exc}"

    def get_queryset(self, request):
        dead = Count("deliveries", filter=Q(deliveries__status=DeliveryStatus.DEAD_LETTERED))
        return super().get_queryset(request).annotate(dead_letter_count=dead)

    @admin.display(description="dead letters", ordering="dead_letter_count")
    def dead_letters(self, obj):
        count = obj.dead_letter_count
        if not count:
            return 0
        return format_html('<a href="/admin/delivery/delivery/?subscription__id__exact={}&status__exact='
                           'dead_lettered">{}</a>', obj.id, count)

    @admin.action(description="Redrive dead letters of selected subscriptions (fresh attempt budget)")
    def redrive(self, request, queryset):
        run_service(self, request, queryset, recovery.subscription_redrive, "Redrove {} dead letter(s).")

    @admin.action(description="Pause selected subscriptions (hold deliveries)")
    def pause(self, request, queryset):
        run_service(self, request, queryset, recovery.subscription_pause, "Paused {} subscription(s).")

    @admin.action(description="Resume selected subscriptions (release held deliveries)")
    def resume(self, request, queryset):
        run_service(self, request, queryset, recovery.subscription_resume, "Resumed {} subscription(s).")


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
    fields = ["url", "owner", "state_badge", "state_reason", "state_changed_at", "next_probe_at",
              "consecutive_failures", "window_attempts", "window_failures", "last_success_at", "last_failure_at",
              "created_at"]
    readonly_fields = fields  # health changes only through the actions below, which record why
    inlines = [TransitionInline]
    actions = ["enable", "disable", "freeze"]

    def has_add_permission(self, request):
        return False  # endpoints come into being with their first subscription

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

"""The operator console's page of subscriptions: the policies tuned with the effective policy, where each of its
sections comes from and the schedule it produces shown, the subscription rules checked by the service the API calls
as it writes the change (console/service_forms.py), its transformation edited and test-run (console/transformations.py),
its event version chosen among the catalog's (and what it receives of each type shown), and the redrive, pause,
resume, resend-confirmation and replay buttons and actions."""

import json

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from delivery.engine.accounts import recovery, removal, signing_secrets, subscribing
from delivery.engine.accounts.confirmation import confirmation_resend
from delivery.engine.intake import replay
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import effective
from delivery.engine.state.effective import subscription_policy, system_default
from delivery.rules import client_certificates, delivery_headers
from delivery.rules.policy import PolicyError
from delivery.rules.vocabulary import DeliveryStatus
from delivery.web import version_previews
from delivery.web.console.actions import run_service
from delivery.web.console.badges import endpoint_link
from delivery.web.console.buttons import Button, ButtonsMixin
from delivery.web.console.deletes import ServiceDeletes
from delivery.web.console.schedules import schedule_table
from delivery.web.console.service_forms import ServiceAdmin, ServiceForm
from delivery.web.console.transformations import TransformationField, TransformationTests
from subscriptions.models import Subscription


class SubscriptionForm(ServiceForm):
    """Written through the API's service (subscribing.subscription_update): the subscription's rules, its policy
    and what must follow a change (a new destination asks for consent again, turning ordering off releases what
    waited) are the service's; a new secret is rotated to after the change."""

    new_secret = forms.CharField(
        required=False, label="New signing secret", strip=False, widget=forms.PasswordInput(render_value=False),
        help_text="Optional, hmac-sha256: a whsec_ secret of your own to rotate to (manage.py herald_secret makes "
                  "one); the current one keeps signing for 24 hours. Empty: the secret stays. Never shown again.")

    transformation = TransformationField(
        help_text="JavaScript defining function handler(webhook), run before each send: it may change webhook.payload, "
                  "webhook.method (POST or PUT) or set webhook.cancel. Compiled when saved; empty code removes it.")

    renamed = {"secret": "new_secret"}  # the service's name for what this form calls new_secret

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "event_version" in self.fields and self.instance.pk:
            pinned = self.instance.event_version
            names = version_previews.version_names(self.instance.topic.owner_id)
            self.fields["event_version"] = forms.ChoiceField(
                required=False, label="Event version", help_text=self.fields["event_version"].help_text,
                choices=[("", "the latest (follows each new version)"), *((name, name) for name in names),
                         *([(pinned, pinned)] if pinned and pinned not in names else [])])

    def write(self, stored, changes):
        secret = changes.pop("new_secret", "")
        subscription = subscribing.subscription_update(subscription=stored, **changes)
        if secret:
            subscription = signing_secrets.subscription_rotate_secret(subscription=subscription, secret=secret)
        return subscription


class ReplayForm(forms.Form):
    since = forms.DateTimeField(help_text="UTC, e.g. 2026-11-21 09:00:00")
    until = forms.DateTimeField(required=False, help_text="UTC; empty: now")


def policy_source(subscription) -> str:
    """Where each section of a subscription's effective policy comes from, in words (SNS's EffectiveDeliveryPolicy:
    the subscription's sections over its topic's over Herald's default)."""
    words = {"subscription": "the subscription's own delivery policy",
             "topic": f"the delivery policy of topic {subscription.topic.name!r}",
             "default": f"Herald's default, HERALD_DEFAULT_DELIVERY_POLICY = "
                        f"{json.dumps(system_default() or 'sns-default')}"}
    by_level: dict[str, list[str]] = {}
    for section, level in effective.sources(subscription).items():
        by_level.setdefault(level, []).append(section)
    return "; ".join(f"{', '.join(sorted(by_level[level]))} from {words[level]}" for level in words
                     if level in by_level)


def _redrive(request, subscription):
    return f"Redrove {recovery.subscription_redrive(subscription=subscription)} dead letter(s)."


def _pause(request, subscription):
    recovery.subscription_pause(subscription=subscription)
    return "Paused: new and pending deliveries are held until it resumes."


def _resume(request, subscription):
    recovery.subscription_resume(subscription=subscription)
    return "Resumed: held deliveries go out now."


def _resend_confirmation(request, subscription):
    confirmation_resend(subscription=subscription)
    return "A new confirmation request is on its way to the endpoint."


@admin.register(Subscription)
class SubscriptionAdmin(ServiceAdmin, ServiceDeletes, TransformationTests, ButtonsMixin, admin.ModelAdmin):
    """Subscriptions are created through the API (secret, confirmation, address checks); here they are inspected,
    their policies tuned, and operated on with the buttons and actions."""

    form = SubscriptionForm
    list_display = ["id", "topic", "endpoint", "status", "raw_message_delivery", "dead_letters", "created_at"]
    list_filter = ["status", "raw_message_delivery", "endpoint__state"]
    search_fields = ["endpoint__url", "topic__name"]
    list_select_related = ["topic", "endpoint"]
    fields = ["topic", "endpoint_link", "status", "dead_letters", "delivery_policy", "effective_policy", "schedule",
              "filter_policy", "filter_policy_scope", "event_types", "ordered_delivery", "max_events_per_batch",
              "preferred_batch_size_kb", "delivery_headers_shown", "send_trace_context", "raw_message_delivery",
              "transformation", "event_version", "versions_received", "signature_scheme", "new_secret",
              "client_certificate_status", "confirmed_at", "last_handshake", "confirmation_expires_at",
              "previous_secret_expires_at", "created_at", "updated_at"]  # never the secrets or the client key
    readonly_fields = ["topic", "endpoint_link", "status", "dead_letters", "effective_policy", "schedule",
                       "versions_received", "signature_scheme", "client_certificate_status", "delivery_headers_shown",
                       "confirmed_at", "last_handshake", "confirmation_expires_at", "previous_secret_expires_at",
                       "created_at", "updated_at"]
    actions = ["redrive", "pause", "resume", "replay"]
    buttons = (
        Button("redrive", "Redrive dead letters", _redrive, shown=lambda s: s.dead_letter_count > 0,
               title="Send its dead letters again with a fresh attempt budget."),
        Button("resend-confirmation", "Resend confirmation request", _resend_confirmation,
               shown=lambda s: s.status == Subscription.Status.PENDING_CONFIRMATION,
               title="A new token to the endpoint; it confirms by echoing it or opening the link."),
        Button("pause", "Pause", _pause, shown=lambda s: s.status == Subscription.Status.CONFIRMED),
        Button("resume", "Resume", _resume, shown=lambda s: s.status == Subscription.Status.PAUSED),
    )

    def has_add_permission(self, request):
        return False

    def delete_model(self, request, obj):
        removal.subscription_delete(subscription=obj)  # refused (shown) while any of its deliveries is being sent

    @admin.display(description="last confirmation request")
    def last_handshake(self, obj):
        if obj is None or obj.handshake_at is None:
            return "none answered yet"
        answered = f"HTTP {obj.handshake_status}" if obj.handshake_status else "no answer"
        return format_html("{} at {} UTC: {}<br><code>{}</code>", answered,
                           obj.handshake_at.strftime("%Y-%m-%d %H:%M:%S"), obj.handshake_problem or "confirmed",
                           obj.handshake_answer[:300] or "(empty body)")

    @admin.display(description="event versions received")
    def versions_received(self, obj):
        shown = version_previews.received(obj) if obj is not None and obj.pk else []
        if not shown:
            return "none: no event type it receives has versions"
        return format_html_join("", "<div><code>{}</code>: {}{}</div>", (
            (each.event_type, each.version, f" (newest: {each.latest})" if each.behind else "") for each in shown))

    @admin.display(description="endpoint")
    def endpoint_link(self, obj):
        return endpoint_link(obj.endpoint)

    @admin.display(description="delivery headers")
    def delivery_headers_shown(self, obj):
        shown = delivery_headers.shown(obj.delivery_headers if obj else [])
        if not shown:
            return "none (set through the API: secret values are never shown)"
        return format_html_join("", "<div><code>{}</code>: {}</div>", (
            (h["name"], f"from attribute {h['from_attribute']!r}" if "from_attribute" in h
             else "(secret)" if h.get("secret") else h["value"]) for h in shown))

    @admin.action(description="Replay archived messages to selected subscriptions…")
    def replay(self, request, queryset):
        """An intermediate page asks for the window; its submit replays to each selected subscription."""
        form = ReplayForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            for subscription in queryset.select_related("topic"):
                try:
                    created = replay.replay_create(subscription=subscription, requested_by=request.user,
                                                   since=form.cleaned_data["since"],
                                                   until=form.cleaned_data.get("until"))
                except ApplicationError as exc:
                    self.message_user(request, f"Subscription {subscription.id}: {exc.message}", messages.WARNING)
                    continue
                self.message_user(request, f"Subscription {subscription.id}: replay {created.id} delivers "
                                           f"{created.messages} message(s) again.", messages.SUCCESS)
            return None
        return TemplateResponse(request, "admin/herald/replay.html", {
            **self.admin_site.each_context(request), "title": "Replay archived messages", "form": form,
            "subscriptions": queryset, "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            "opts": self.model._meta})

    @admin.display(description="client certificate (mTLS)")
    def client_certificate_status(self, obj):
        expires = obj.client_certificate_expires_at if obj else None
        if expires is None:
            return "none (set through the API)"
        days = (expires - timezone.now()).days
        warning = days < client_certificates.EXPIRY_WARNING_DAYS
        return format_html('<span class="{}">expires {} UTC ({})</span>', "errornote" if warning else "",
                           expires.strftime("%Y-%m-%d %H:%M:%S"),
                           f"in {days} days: replace it soon" if warning else f"in {days} days")

    @admin.display(description="effective delivery policy")
    def effective_policy(self, obj):
        if obj is None or obj.pk is None:
            return "—"
        try:
            document = json.dumps(subscription_policy(obj).document, indent=2)
        except PolicyError as exc:
            return f"invalid policy: {exc}"
        return format_html('<p id="herald-policy-source">{}.</p><pre style="white-space: pre-wrap">{}</pre>',
                           policy_source(obj), document)

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
        return format_html('<a href="/admin/herald_delivery/delivery/?subscription__id__exact={}&status__exact='
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

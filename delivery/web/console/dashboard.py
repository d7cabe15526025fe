"""The operator dashboard: traffic over time, failing endpoints, endpoint states, dead letters, queues."""

from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import Count, Q
from django.db.models.functions import TruncHour, TruncMinute
from django.shortcuts import redirect, render
from django.utils import timezone

from delivery.models import Attempt, Dashboard, Delivery
from delivery.rules import client_certificates
from delivery.rules.vocabulary import AttemptOutcome, DeliveryStatus
from delivery.web import fanout_report, selectors
from subscriptions.models import Endpoint, Subscription
from subscriptions.states import EndpointState

SPANS = {"1h": (timedelta(hours=1), TruncMinute, timedelta(minutes=1)),
         "24h": (timedelta(hours=24), TruncHour, timedelta(hours=1))}
CHART_HEIGHT = 120


def traffic(span: str, now) -> dict:
    """Attempts per bucket, split into successes and failures, ready to draw as bars."""
    length, trunc, step = SPANS[span]
    first = now - length
    rows = (Attempt.objects.filter(started_at__gte=first).annotate(bucket=trunc("started_at"))
            .values("bucket").annotate(ok=Count("id", filter=Q(outcome=AttemptOutcome.SUCCESS)),
                                       failed=Count("id", filter=~Q(outcome=AttemptOutcome.SUCCESS))))
    counts = {row["bucket"]: (row["ok"], row["failed"]) for row in rows}
    buckets, moment = [], trunc_to(first, step)
    while moment <= now:
        ok, failed = counts.get(moment, (0, 0))
        buckets.append({"at": moment, "ok": ok, "failed": failed})
        moment += step
    peak = max((b["ok"] + b["failed"] for b in buckets), default=0) or 1
    width = 100 / len(buckets)
    for index, bucket in enumerate(buckets):
        bucket["x"] = round(index * width, 3)
        bucket["w"] = round(width * 0.8, 3)
        bucket["ok_h"] = round(bucket["ok"] / peak * CHART_HEIGHT, 1)
        bucket["failed_h"] = round(bucket["failed"] / peak * CHART_HEIGHT, 1)
        bucket["failed_y"] = round(CHART_HEIGHT - bucket["failed_h"], 1)
        bucket["ok_y"] = round(bucket["failed_y"] - bucket["ok_h"], 1)
    return {"buckets": buckets, "peak": peak, "height": CHART_HEIGHT, "span": span,
            "total_ok": sum(b["ok"] for b in buckets), "total_failed": sum(b["failed"] for b in buckets)}


def trunc_to(moment, step: timedelta):
    if step == timedelta(minutes=1):
        return moment.replace(second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def queues() -> dict:
    try:
        return {"depths": selectors.queue_depths(), "workers": selectors.workers(), "error": ""}
    except Exception as exc:  # the dashboard must render while Redis is down, and say so
        return {"depths": {}, "workers": [], "error": f"Redis is unreachable: {exc}"}


@staff_member_required
def dashboard(request):
    now = timezone.now()
    span = request.GET.get("span", "24h") if request.GET.get("span") in SPANS else "24h"
    dead_by_reason = selectors.dead_letters_by_reason()
    context = {
        "title": "Delivery dashboard",
        "traffic": traffic(span, now),
        "spans": list(SPANS),
        "states": {state: n for state, n in selectors.endpoints_by_state().items() if n},
        "failing": Endpoint.objects.filter(Q(consecutive_failures__gt=0) | ~Q(state=EndpointState.ACTIVE))
        .order_by("-consecutive_failures", "-window_failures")[:10],
        "dead_total": sum(dead_by_reason.values()),
        "dead_by_reason": dead_by_reason,
        "recent_failures": list(Delivery.objects.filter(
            Q(status=DeliveryStatus.DEAD_LETTERED) | Q(status=DeliveryStatus.PENDING, attempt_count__gt=0))
        .select_related("endpoint", "subscription__topic").order_by("-last_attempt_at")[:15]),
        "pending_retries": Delivery.objects.filter(status=DeliveryStatus.PENDING, attempt_count__gt=0).count(),
        "held": selectors.held_count(),
        "queues": queues(),
        "expiring_certificates": Subscription.objects.filter(
            client_certificate_expires_at__lt=now + timedelta(days=client_certificates.EXPIRY_WARNING_DAYS))
        .select_related("topic", "endpoint").order_by("client_certificate_expires_at")[:20],
        "expiry_warning_days": client_certificates.EXPIRY_WARNING_DAYS,
    }
    for delivery in context["recent_failures"]:
        delivery.reason = fanout_report.where_it_stands(delivery)
    return render(request, "admin/herald/dashboard.html", context)


@admin.register(Dashboard)
class DashboardEntry(admin.ModelAdmin):
    """The admin index's link to the dashboard (any staff user may follow it; it shows what the dashboard shows)."""

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        return redirect("herald:dashboard")

"""The read side: what the metrics API, the dashboard, Prometheus and the tenant portal show, each query written
once.

Per-subscription and per-topic metrics over a window (like Event Grid's subscription view); counts of deliveries
by status, dead letters by reason, held deliveries and endpoints by state; queue depths and workers in Redis; and
what a tenant's portal reads, each scoped to the tenant (its own subscriptions, deliveries and attempts, its
owner's open topics and catalog)."""

import functools
import re
from datetime import timedelta

import django_rq
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, Min, Q
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rq import Worker

from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.plumbing.shortcuts import Statement, instance
from delivery.engine.state import lifecycle
from delivery.models import Attempt, Delivery, Message
from delivery.rules.vocabulary import UNFINISHED, AttemptOutcome, AttemptQueue, DeliveryStatus
from subscriptions.models import Endpoint, EventType, Portal, Subscription, Topic
from subscriptions.states import EndpointState

WINDOW = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW = timedelta(days=31)
LATENCY_SAMPLE = 100_000


# --- what every API request reads: compiled once per process (plumbing/shortcuts.py) ------------------------------

@functools.cache
def columns(model) -> tuple[str, ...]:
    return tuple(field.attname for field in model._meta.concrete_fields)


TOKEN = Statement(lambda key: Token.objects.filter(key=key).values_list(
    *columns(Token), *(f"user__{name}" for name in columns(get_user_model()))), str)
OWN_TOPIC_BY_ID = Statement(lambda owner, pk: Topic.objects.filter(owner_id=owner, pk=pk)[:1], int, int)
OWN_TOPIC_BY_NAME = Statement(lambda owner, name: Topic.objects.filter(owner_id=owner, name=name)[:1], int, str)


def token_and_user(key: str):
    """(token, its user, loaded with it) of an API key in one statement, or None."""
    found = instance(TOKEN, key)
    if found is None:
        return None
    token_columns, user_model = columns(Token), get_user_model()
    user = user_model.from_db(DEFAULT_DB_ALIAS, columns(user_model), found[len(token_columns):])
    token = Token.from_db(DEFAULT_DB_ALIAS, token_columns, found[:len(token_columns)])
    Token.user.field.set_cached_value(token, user)
    return token, user


def own_topic(owner_id: int, key: int | str, name: str) -> Topic | None:
    """An owner's topic by id (`key` an int) or else by `name`, for an owner keyed by an integer."""
    found = instance(OWN_TOPIC_BY_ID, owner_id, key) if isinstance(key, int) else None
    return found or instance(OWN_TOPIC_BY_NAME, owner_id, name)


def parse_window(raw: str | None) -> timedelta:
    """`90s`, `15m`, `24h`, `7d` (default 24h, at most 31 days)."""
    match = WINDOW.match(raw or "24h")
    if not match:
        raise ApplicationError("Use a number and a unit: s, m, h or d (e.g. 24h).", field="window")
    number = match.group(1).lstrip("0") or "0"
    # A number longer than 12 digits is past any allowed window; not parsing it avoids huge ints and overflow.
    seconds = int(number) * UNITS[match.group(2)] if len(number) <= 12 else None
    if seconds is None or not 1 <= seconds <= MAX_WINDOW.total_seconds():
        raise ApplicationError("The window must be between 1 second and 31 days.", field="window")
    return timedelta(seconds=seconds)


def percentile(sorted_values: list[float], fraction: float) -> float | None:
    if not sorted_values:
        return None
    rank = fraction * (len(sorted_values) - 1)
    low, high = int(rank), min(int(rank) + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def _summarize(deliveries, attempts, published: int, window: timedelta) -> dict:
    counts = deliveries.aggregate(
        matched=Count("id"),
        succeeded=Count("id", filter=Q(status=DeliveryStatus.SUCCEEDED)),
        dead_lettered=Count("id", filter=Q(status=DeliveryStatus.DEAD_LETTERED)),
        dropped=Count("id", filter=Q(status=DeliveryStatus.DROPPED)),
        pending=Count("id", filter=Q(status__in=[DeliveryStatus.PENDING, DeliveryStatus.IN_FLIGHT])),
    )
    latencies = sorted(
        (delivered - published_at).total_seconds() * 1000
        for delivered, published_at in deliveries.filter(status=DeliveryStatus.SUCCEEDED)
        .values_list("delivered_at", "message__published_at")[:LATENCY_SAMPLE]
    )
    failed_attempts = attempts.exclude(outcome=AttemptOutcome.SUCCESS).count()
    return {
        "window_seconds": int(window.total_seconds()),
        "published": published,
        **counts,
        "attempts": attempts.count(),
        "failed_attempts": failed_attempts,
        "latency_ms": {name: None if value is None else round(value, 1) for name, value in (
            ("p50", percentile(latencies, 0.50)), ("p90", percentile(latencies, 0.90)),
            ("p99", percentile(latencies, 0.99)), ("max", latencies[-1] if latencies else None))},
    }


def subscription_metrics(subscription, window: timedelta) -> dict:
    """`published` counts what was published for the subscription's audience: for a tenant's, the messages addressed
    to that tenant or broadcast (never another tenant's volume); for the owner's own, every message of the topic."""
    since = timezone.now() - window
    deliveries = Delivery.objects.filter(subscription=subscription, message__published_at__gte=since)
    attempts = Attempt.objects.filter(delivery__subscription=subscription, started_at__gte=since)
    messages = Message.objects.filter(topic_id=subscription.topic_id, published_at__gte=since)
    if subscription.tenant_id is not None:
        messages = messages.filter(Q(tenant_id=subscription.tenant_id) | Q(broadcast=True))
    return _summarize(deliveries, attempts, messages.count(), window)


def topic_metrics(topic, window: timedelta) -> dict:
    since = timezone.now() - window
    deliveries = Delivery.objects.filter(message__topic=topic, message__published_at__gte=since)
    attempts = Attempt.objects.filter(delivery__message__topic=topic, started_at__gte=since)
    published = Message.objects.filter(topic=topic, published_at__gte=since).count()
    return _summarize(deliveries, attempts, published, window)


def unfinished_by_status() -> dict[str, int]:
    """Every unfinished status (pending, in flight, waiting), with 0 where none: counted along the index that leads
    with the status, so the count reads the backlog and never the finished history."""
    counts = dict(Delivery.objects.filter(status__in=UNFINISHED).values_list("status").annotate(n=Count("status"))
                  .order_by())
    return {status.value: counts.get(status, 0) for status in UNFINISHED}


def dead_letters_by_reason(queryset=None) -> dict[str, int]:
    dead = (queryset or Delivery.objects.all()).filter(status=DeliveryStatus.DEAD_LETTERED)
    return dict(dead.values_list("dead_letter_reason").annotate(n=Count("id")).order_by())


def recent_dead_letters_by_reason(since) -> dict[str, int]:
    """Deliveries dead-lettered since `since`, by reason: read along (status, finished_at), the window's rows only."""
    dead = Delivery.objects.filter(status=DeliveryStatus.DEAD_LETTERED, finished_at__gte=since)
    return dict(dead.values_list("dead_letter_reason").annotate(n=Count("id")).order_by())


def held_count() -> int:
    """Pending deliveries with no due time: paused subscription, or a disabled or frozen endpoint."""
    return lifecycle.held().count()


def endpoints_by_state() -> dict[str, int]:
    counts = dict(Endpoint.objects.values_list("state").annotate(n=Count("id")).order_by())
    return {state.value: counts.get(state, 0) for state in EndpointState}


def owner_status(now, *, include_endpoints: bool = True, include_dead_letters: bool = True) -> list[dict]:
    """Per owner, what the on-call asks first (`manage.py herald_status`): deliveries due now and the age of the
    oldest (the lag), in flight, held, waiting for an ordering key, dead letters of the last 24 hours, endpoints
    disabled or frozen (the first 1,000), subscriptions awaiting confirmation. A few grouped counts: each reads the
    rows it counts (the partial indexes of pending rows for due and held), so its cost grows with the backlog, not
    with the tables' history. The scrape leaves out the endpoints and the dead letters (a day of them is no
    backlog; it has their counters)."""
    owners: dict[int, dict] = {}

    def row(owner_id: int) -> dict:
        return owners.setdefault(owner_id, {"owner": owner_id, "due": 0, "lag_seconds": None, "in_flight": 0,
                                            "held": 0, "waiting": 0, "dead_letters_24h": 0, "unhealthy": [],
                                            "awaiting_confirmation": 0})

    for owner_id, count, oldest in (lifecycle.due(now).values_list("owner_id").annotate(n=Count("id"),
                                                                                         oldest=Min("next_attempt_at"))
                                    .order_by()):
        row(owner_id).update(due=count, lag_seconds=round((now - oldest).total_seconds(), 1))
    counted = [("in_flight", lifecycle.in_flight()), ("held", lifecycle.held()), ("waiting", lifecycle.waiting())]
    if include_dead_letters:
        counted.append(("dead_letters_24h", Delivery.objects.filter(status=DeliveryStatus.DEAD_LETTERED,
                                                                    finished_at__gte=now - timedelta(hours=24))))
    for name, rows in counted:
        for owner_id, count in rows.values_list("owner_id").annotate(n=Count("id")).order_by():
            row(owner_id)[name] = count
    unhealthy = Endpoint.objects.exclude(state=EndpointState.ACTIVE).order_by("id") if include_endpoints else []
    for owner_id, url, state, reason in (unhealthy.values_list("owner_id", "url", "state", "state_reason")[:1000]
                                         if include_endpoints else []):
        row(owner_id)["unhealthy"].append({"url": url, "state": state, "reason": reason})
    for owner_id, count in (Subscription.objects.filter(status=Subscription.Status.PENDING_CONFIRMATION)
                            .values_list("topic__owner_id").annotate(n=Count("id")).order_by()):
        row(owner_id)["awaiting_confirmation"] = count
    names = dict(get_user_model().objects.filter(id__in=owners).values_list("id", "username"))
    return [{**owners[owner_id], "name": names.get(owner_id, "?")} for owner_id in sorted(owners)]


def queue_depths() -> dict[str, int]:
    """Jobs waiting on each RQ queue; raises when Redis is unreachable (callers say so their own way)."""
    return {name.value: django_rq.get_queue(name).count for name in (AttemptQueue.DELIVERIES, AttemptQueue.RETRIES)}


def workers() -> list[dict]:
    connection = django_rq.get_connection(AttemptQueue.DELIVERIES)
    return [{"name": w.name, "state": w.get_state(), "queues": ", ".join(w.queue_names()),
             "current_job": w.get_current_job_id() or ""} for w in Worker.all(connection=connection)]


# What a tenant's portal reads: everything through the tenant, so a page cannot reach another's rows.

def portal_settings(owner_id: int) -> Portal:
    """The owner's portal settings, or the defaults (unsaved) when it has none."""
    return Portal.objects.filter(owner_id=owner_id).first() or Portal(owner_id=owner_id)


def tenant_subscriptions(tenant):
    return Subscription.objects.filter(tenant=tenant, topic__owner_id=tenant.owner_id).select_related(
        "topic", "endpoint")


def tenant_catalog(tenant):
    """The owner's event types open to tenants (deprecated ones too: a page marks them)."""
    return EventType.objects.filter(owner_id=tenant.owner_id, open_to_tenants=True)


def tenant_topics(tenant):
    """The owner's topics open to tenants, by name."""
    return Topic.objects.filter(owner_id=tenant.owner_id, open_to_tenants=True).order_by("name")


def recent_deliveries(subscription, limit: int) -> list:
    return list(Delivery.objects.filter(subscription=subscription).select_related("message").order_by("-id")[:limit])


def recent_transitions(endpoint, limit: int) -> list:
    return list(endpoint.transitions.all()[:limit])


def history_size(subscription, up_to: int) -> int:
    """How many deliveries a subscription has, counted up to `up_to` + 1 (enough to say "more than")."""
    return subscription.deliveries.all()[:up_to + 1].count()


def tenant_deliveries(tenant):
    return Delivery.objects.filter(subscription__in=tenant_subscriptions(tenant)).select_related(
        "message", "subscription__topic", "endpoint")


def recent_attempts(delivery, limit: int) -> list:
    return list(delivery.attempts.select_related("exchange").order_by("-number")[:limit])

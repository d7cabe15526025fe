"""`/metrics` for Prometheus, read at scrape time (docs/operators.md, "Metrics").

Workers, web processes and the scheduler are separate processes on any number of hosts, so in-process counters
would each see a slice. Two shared sources answer instead: PostgreSQL for what is (gauges: unfinished deliveries by
status, the age of the oldest due delivery, backlog per owner, endpoints by state, confirmations awaited, what the
last five minutes saw), and Redis for what happened (counters that only grow and histograms: attempts, deliveries
created and finished, messages published, attempt durations, publish to first success;
engine/plumbing/counters.py), plus each worker's send slots as it last reported them. One scrape costs a few
grouped counts, each read along an index of the rows it counts (unfinished rows, a five-minute window), so it
grows with the backlog and never with the finished history, and a few Redis reads. Labels are bounded: outcomes,
error classes, queues, owners' ids (a shop's accounts: few), never tenants.
Enabled by setting HERALD_METRICS_TOKEN; scrapers send it as `Authorization: Bearer <token>`.
"""

import hmac
import logging
import time
from datetime import timedelta

from django.db.models import Count
from django.http import Http404, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from redis.exceptions import RedisError

from delivery.conf import herald
from delivery.engine.plumbing import counters
from delivery.models import Attempt, Message
from delivery.web import selectors

log = logging.getLogger(__name__)

RECENT = timedelta(minutes=5)


class HeraldCollector:
    def collect(self):
        yield from _deliveries()
        since = timezone.now() - RECENT
        yield from _recent(since)
        yield from _owners(timezone.now())
        yield from shared_counters(time.time())
        yield _queues()


def _deliveries():
    """What is unfinished: deliveries by status, those held, endpoints by state."""
    deliveries = GaugeMetricFamily("herald_deliveries", "Unfinished deliveries by status (pending, in_flight, "
                                   "waiting; herald_deliveries_finished_total counts the finished).",
                                   labels=["status"])
    for status, n in selectors.unfinished_by_status().items():
        deliveries.add_metric([status], n)
    yield deliveries

    held = GaugeMetricFamily("herald_deliveries_held", "Pending deliveries held (paused or unhealthy endpoint).")
    held.add_metric([], selectors.held_count())
    yield held

    endpoints = GaugeMetricFamily("herald_endpoints", "Endpoints by state.", labels=["state"])
    for state, n in selectors.endpoints_by_state().items():
        endpoints.add_metric([state], n)
    yield endpoints


def _recent(since):
    """What the window since `since` saw: attempts by outcome, dead letters by reason, schema mismatches."""
    attempts = GaugeMetricFamily("herald_recent_attempts", "Attempts in the last five minutes by outcome (a "
                                 "window: use herald_attempts_total for rates).", labels=["outcome"])
    for outcome, n in (Attempt.objects.filter(started_at__gte=since).values_list("outcome")
                       .annotate(n=Count("id")).order_by()):
        attempts.add_metric([outcome], n)
    yield attempts

    dead = GaugeMetricFamily("herald_recent_dead_letters", "Deliveries dead-lettered in the last five minutes, "
                             "by reason (herald_deliveries_finished_total counts them all).", labels=["reason"])
    for reason, n in selectors.recent_dead_letters_by_reason(since).items():
        dead.add_metric([reason], n)
    yield dead

    drift = GaugeMetricFamily("herald_recent_schema_mismatches", "Messages published in the last five minutes "
                              "whose payload did not match their event type's schema (on_mismatch record).",
                              labels=["event_type"])
    for event_type, n in (Message.objects.filter(published_at__gte=since).exclude(schema_mismatch="")
                          .values_list("event_type").annotate(n=Count("id")).order_by()):
        drift.add_metric([event_type], n)
    yield drift


def _owners(now):
    """The lag (overall and per owner), the backlog per owner and the confirmations awaited."""
    owners = selectors.owner_status(now, include_endpoints=False, include_dead_letters=False)
    lag = GaugeMetricFamily("herald_oldest_due_delivery_age_seconds", "Age of the oldest delivery due now (the "
                            "lag; 0 when nothing is due).")
    owner_lag = GaugeMetricFamily("herald_owner_oldest_due_delivery_age_seconds", "The lag per owner (its user "
                                  "id).", labels=["owner"])
    backlog = GaugeMetricFamily("herald_deliveries_due", "Deliveries due now, per owner (its user id).",
                                labels=["owner"])
    ages = [owner["lag_seconds"] for owner in owners if owner["lag_seconds"] is not None]
    lag.add_metric([], max(ages) if ages else 0)
    for owner in owners:
        owner_lag.add_metric([str(owner["owner"])], owner["lag_seconds"] or 0)
        backlog.add_metric([str(owner["owner"])], owner["due"])
    yield lag
    yield owner_lag
    yield backlog
    awaiting = GaugeMetricFamily("herald_subscriptions_awaiting_confirmation",
                                 "Subscriptions whose endpoint has not confirmed (handshakes pending).")
    awaiting.add_metric([], sum(owner["awaiting_confirmation"] for owner in owners))
    yield awaiting


def _queues():
    queues = GaugeMetricFamily("herald_queue_jobs", "Jobs waiting in each RQ queue.", labels=["queue"])
    try:
        for name, depth in selectors.queue_depths().items():
            queues.add_metric([name], depth)
    except Exception:  # Redis down: report what we can; the missing series says it
        pass
    return queues


COUNTED = {  # counter name in Redis → (Prometheus family, help, labels)
    "attempts": ("herald_attempts", "Attempts recorded, by outcome, error class and queue.",
                 ["outcome", "error_class", "queue"]),
    "deliveries_created": ("herald_deliveries_created", "Deliveries created (publish, fan-out, replay).", []),
    "deliveries_finished": ("herald_deliveries_finished", "Deliveries finished, by status (succeeded, "
                            "dead_lettered, dropped).", ["status"]),
    "messages_published": ("herald_messages_published", "Messages published.", []),
}
HISTOGRAMS = {
    "attempt_duration_seconds": ("herald_attempt_duration_seconds", "How long an attempt took, request to answer."),
    "publish_to_success_seconds": ("herald_publish_to_success_seconds",
                                   "From a message's publish to its delivery's success."),
}


def shared_counters(now: float):
    """The families kept in Redis: none when Redis cannot be read (the missing series say it)."""
    try:
        counted, observed = counters.read()
        slots = counters.read_slots(now)
    except RedisError as exc:
        log.warning("metrics: Redis could not be read (%s); the counters, histograms and slots are left out", exc)
        return
    families = {name: CounterMetricFamily(family, help_text, labels=labels)
                for name, (family, help_text, labels) in COUNTED.items()}
    for (name, *labels), value in sorted(counted.items()):
        if name in families and len(labels) == len(COUNTED[name][2]):
            families[name].add_metric(labels, value)
    yield from families.values()
    for name, (family, help_text) in HISTOGRAMS.items():
        histogram = HistogramMetricFamily(family, help_text)
        found = observed[name]
        histogram.add_metric([], [(str(bound), count) for bound, count in found["buckets"]], found["sum"])
        yield histogram
    in_use = GaugeMetricFamily("herald_send_slots_in_use", "Send slots in use, per worker process (as each last "
                               "reported, within a minute).", labels=["process"])
    free = GaugeMetricFamily("herald_send_slots_free", "Send slots free, per worker process.", labels=["process"])
    for process, (used, total) in sorted(slots.items()):
        in_use.add_metric([process], used)
        free.add_metric([process], max(total - used, 0))
    yield in_use
    yield free


def metrics(request):
    token = herald.METRICS_TOKEN
    if not token:
        raise Http404("metrics are disabled; set HERALD_METRICS_TOKEN")
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(given, token):
        return HttpResponse("a bearer token is required\n", status=401, content_type="text/plain",
                            headers={"WWW-Authenticate": "Bearer"})
    registry = CollectorRegistry()
    registry.register(HeraldCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

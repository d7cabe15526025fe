"""`/metrics` for Prometheus: gauges and counters read from PostgreSQL and Redis at scrape time.

Workers, web processes and the scheduler are separate processes on any number of hosts, so in-process counters
would each see a slice. The database already holds the truth; one scrape costs a few aggregate queries.
Enabled by setting HERALD_METRICS_TOKEN; scrapers send it as `Authorization: Bearer <token>`.
"""

import hmac
from datetime import timedelta

from django.db.models import Count
from django.http import Http404, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from delivery.conf import herald
from delivery.models import Attempt, Message
from delivery.web import selectors

RECENT = timedelta(minutes=5)


class HeraldCollector:
    def collect(self):
        deliveries = GaugeMetricFamily("herald_deliveries", "Deliveries by status (within retention).",
                                       labels=["status"])
        for status, n in selectors.deliveries_by_status().items():
            deliveries.add_metric([status], n)
        yield deliveries

        dead = GaugeMetricFamily("herald_dead_letters", "Dead-lettered deliveries by reason.", labels=["reason"])
        for reason, n in selectors.dead_letters_by_reason().items():
            dead.add_metric([reason], n)
        yield dead

        held = GaugeMetricFamily("herald_deliveries_held", "Pending deliveries held (paused or unhealthy endpoint).")
        held.add_metric([], selectors.held_count())
        yield held

        endpoints = GaugeMetricFamily("herald_endpoints", "Endpoints by state.", labels=["state"])
        for state, n in selectors.endpoints_by_state().items():
            endpoints.add_metric([state], n)
        yield endpoints

        attempts = CounterMetricFamily("herald_recent_attempts", "Attempts in the last five minutes by outcome.",
                                       labels=["outcome"])
        since = timezone.now() - RECENT
        for outcome, n in (Attempt.objects.filter(started_at__gte=since).values_list("outcome")
                           .annotate(n=Count("id")).order_by()):
            attempts.add_metric([outcome], n)
        yield attempts

        drift = GaugeMetricFamily("herald_recent_schema_mismatches", "Messages published in the last five minutes "
                                  "whose payload did not match their event type's schema (on_mismatch record).",
                                  labels=["event_type"])
        for event_type, n in (Message.objects.filter(published_at__gte=since).exclude(schema_mismatch="")
                              .values_list("event_type").annotate(n=Count("id")).order_by()):
            drift.add_metric([event_type], n)
        yield drift

        queues = GaugeMetricFamily("herald_queue_jobs", "Jobs waiting in each RQ queue.", labels=["queue"])
        try:
            for name, depth in selectors.queue_depths().items():
                queues.add_metric([name], depth)
        except Exception:  # Redis down: report what we can; the missing series says it
            pass
        yield queues


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

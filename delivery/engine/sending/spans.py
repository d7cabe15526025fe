"""What each recorded try tells operators: one `herald attempt` span when tracing is on
(delivery/engine/plumbing/tracing.py), one `herald.attempt` log line, and the operators' counters.

A span starts as its request is handed to the transport (so a wait for the endpoint's send slots is inside it, and
its "request sent" event marks when the request really left) and ends as the try is recorded, with what became of
it. Its parent is the publish's span, stored with the message: a retry hours later, on another host, or after a
redrive is still part of the publish's trace. A replay is another matter: someone asked for it, days later
perhaps, so its tries start a trace of their own, linked to the publish's span (as a parent, the publish would
seem to have caused them). The endpoint receives the attempt span's `traceparent` (unless its subscription turned
`send_trace_context` off); a batch's request carries its first event's. A try whose worker stopped before it was
recorded is recorded by the scheduler, with a span of its own (`lost`).

Like the rest of tracing, nothing here raises: a failure leaves the try untraced (tracing.failure_safe); a
counter that fails is logged, never the recording's failure.
"""

import logging
from collections import Counter
from dataclasses import replace
from urllib.parse import urlsplit

from delivery.engine.plumbing import clock, counters, tracing
from delivery.engine.state import announce
from delivery.models import Delivery
from delivery.rules.vocabulary import DeliveryStatus

log = logging.getLogger(__name__)
attempt_log = logging.getLogger("herald.attempt")

SPAN_NAME = "herald attempt"
NOT_SENT_NAME = "herald send not started"


def _attributes(delivery: Delivery, number: int) -> dict:
    return {"herald.owner": delivery.subscription.topic.owner_id, "herald.tenant": announce.tenant_name(
        delivery.tenant_id), "herald.subscription": delivery.subscription_id, "herald.delivery": delivery.id,
        "herald.message": str(delivery.message_id), "herald.attempt": number, "herald.replay": delivery.replay_id,
        "server.address": urlsplit(delivery.endpoint.url).hostname, "http.request.method": "POST"}


def _start(delivery: Delivery, number: int, start_time: int | None = None):
    stored = delivery.message.trace_parent
    if delivery.replay_id is None:
        return tracing.started(SPAN_NAME, stored, _attributes(delivery, number), start_time=start_time)
    return tracing.started(SPAN_NAME, "", _attributes(delivery, number), start_time=start_time, linked=stored)


@tracing.failure_safe()
def started(unit: list, numbers: list[int]) -> list | None:
    """A started span for each delivery of a request (`unit`: (delivery, policy) pairs); None when tracing is
    off."""
    if not tracing.on():
        return None
    return [_start(delivery, number) for (delivery, _), number in zip(unit, numbers, strict=True)]


def carried(request, span, subscription):
    """The request with the span's `traceparent` header, unless the subscription opted out."""
    header = tracing.traceparent(span)
    if not header or not subscription.send_trace_context:
        return request
    return replace(request, headers={**request.headers, "traceparent": header})


@tracing.failure_safe(default={})
def ended(tries: list, attempts: dict, written: set[int]) -> dict:
    """End each try's span with its outcome (a try that failed inside Herald before sending, or whose answer came
    from the journal, has none yet: it gets one now). Returns {delivery id: span}, for the log lines."""
    if not tracing.on():
        return {}
    spans = {}
    for tried in tries:
        delivery, result = tried.delivery, tried.result
        started_ns = int(result.started_at * 1e9)
        span = tried.span or _start(delivery, tried.number, started_ns)
        attempt = attempts.get(delivery.id)
        finished = result.started_at + result.duration_ms / 1000
        tracing.ended(span, {
            "herald.queue": tried.queue, "herald.outcome": attempt.outcome if attempt is not None else None,
            "herald.recorded": delivery.id in written, "http.response.status_code": result.status,
            "error.type": result.error_class or None}, error=None if result.ok else (result.error_class or "failed"),
            events=(("request sent", started_ns),) if tried.request is not None else (),
            end_time=int(finished * 1e9))
        spans[delivery.id] = span
    return spans


@tracing.failure_safe()
def lost(attempts: list, deliveries: dict[int, Delivery]) -> None:
    """Spans for tries whose worker stopped before recording them (`lease_expired` attempts, made by the
    scheduler): the request may have reached the endpoint, under the span the worker started and never ended."""
    if not tracing.on():
        return
    for attempt in attempts:
        delivery = deliveries[attempt.delivery_id]
        span = _start(delivery, attempt.number, int(attempt.started_at.timestamp() * 1e9))
        tracing.ended(span, {"herald.queue": attempt.queue, "herald.outcome": attempt.outcome,
                             "herald.recorded": True, "error.type": attempt.error_class},
                      error=attempt.error_class)


@tracing.failure_safe()
def not_sent(span) -> None:
    """A request the endpoint's send slots never let start: not an attempt; it is due again shortly."""
    tracing.ended(span, {"herald.outcome": "not_sent"}, name=NOT_SENT_NAME)


def what_next(changes: dict) -> str:
    status = changes.get("status")
    if status == DeliveryStatus.PENDING:
        return f"retry at {changes['next_attempt_at'].isoformat()}"
    if status in (DeliveryStatus.DEAD_LETTERED, DeliveryStatus.DROPPED, DeliveryStatus.CANCELLED):
        return f"{status} ({changes.get('dead_letter_reason', '')})"
    return str(status)


def count_attempts(tries: list, attempts: dict, changes: dict[int, dict], now) -> None:
    """The operators' counters (engine/plumbing/counters.py): attempts by outcome, error class and queue, their
    durations, and for deliveries that succeeded, the time from publish to that success."""
    try:
        counts: Counter = Counter()
        durations, to_success = [], []
        for tried in tries:
            attempt = attempts.get(tried.delivery.id)
            if attempt is None:
                continue
            counts[counters.field("attempts", attempt.outcome, attempt.error_class or "", attempt.queue)] += 1
            durations.append(attempt.duration_ms / 1000)
            delivery = tried.delivery
            first_budget = delivery.replay_id is None and delivery.budget_started_at is None  # not replayed, redriven
            if first_budget and changes.get(delivery.id, {}).get("status") == DeliveryStatus.SUCCEEDED:
                delivered = changes[delivery.id].get("delivered_at") or now or clock.now()
                to_success.append(max((delivered - delivery.message.published_at).total_seconds(), 0.0))
        counters.add(counts, {"attempt_duration_seconds": durations, "publish_to_success_seconds": to_success})
    except Exception:  # a figure never fails the recording it counts
        log.exception("the operators' counters of %d attempts could not be added", len(tries))


def log_attempts(tries: list, changes: dict[int, dict], traced: dict | None = None) -> None:
    """One line per recorded attempt: whose (owner id, tenant's external id), which delivery, where (the
    endpoint's host only: a URL's path or query may carry a token), what came back, how long it took, what
    happens next and, when tracing is on, the trace. With the JSON formatter (delivery/logformat.py) the fields
    are the line's keys."""
    if not attempt_log.isEnabledFor(logging.INFO):
        return
    for tried in tries:
        delivery, result = tried.delivery, tried.result
        fields = {"owner": delivery.subscription.topic.owner_id, "tenant": announce.tenant_name(delivery.tenant_id),
                  "delivery": delivery.id, "message": str(delivery.message_id),
                  "subscription": delivery.subscription_id,
                  "endpoint_host": urlsplit(delivery.endpoint.url).hostname, "attempt": tried.number,
                  "queue": tried.queue, "outcome": "succeeded" if result.ok else "failed", "status": result.status,
                  "error": result.error_class or None, "duration_ms": result.duration_ms,
                  "next": what_next(changes[delivery.id]),
                  "trace_id": tracing.trace_id((traced or {}).get(delivery.id))}
        attempt_log.info("attempt %s", " ".join(f"{key}={value}" for key, value in fields.items() if value is not None),
                         extra={"herald": fields})

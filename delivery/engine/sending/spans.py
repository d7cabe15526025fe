"""One `herald attempt` span per try of a delivery, when tracing is on (delivery/engine/plumbing/tracing.py).

A span starts as its request is handed to the transport (so a wait for the endpoint's send slots is inside it, and
its "request sent" event marks when the request really left) and ends as the try is recorded, with what became of
it. Its parent is the publish's span, stored with the message: a retry hours later, on another host, or after a
redrive is still part of the publish's trace. A replay is another matter: someone asked for it, days later
perhaps, so its tries start a trace of their own, linked to the publish's span (as a parent, the publish would
seem to have caused them). The endpoint receives the attempt span's `traceparent` (unless its subscription turned
`send_trace_context` off); a batch's request carries its first event's.
"""

from dataclasses import replace
from urllib.parse import urlsplit

from delivery.engine.plumbing import tracing
from delivery.engine.state import announce
from delivery.models import Delivery

SPAN_NAME = "herald attempt"


def _attributes(delivery: Delivery, number: int) -> dict:
    return {"herald.owner": delivery.subscription.topic.owner_id, "herald.tenant": announce.tenant_name(
        delivery.tenant_id), "herald.subscription": delivery.subscription_id, "herald.delivery": delivery.id,
        "herald.message": str(delivery.message_id), "herald.attempt": number, "herald.replay": delivery.replay_id,
        "server.address": urlsplit(delivery.endpoint.url).hostname, "http.request.method": "POST"}


def started(unit: list, numbers: list[int]) -> list | None:
    """A started span for each delivery of a request (`unit`: (delivery, policy) pairs); None when tracing is
    off."""
    if not tracing.on():
        return None
    spans = []
    for (delivery, _), number in zip(unit, numbers, strict=True):
        stored = delivery.message.trace_parent
        if delivery.replay_id is None:
            spans.append(tracing.started(SPAN_NAME, stored, _attributes(delivery, number)))
        else:
            spans.append(tracing.started(SPAN_NAME, "", _attributes(delivery, number), linked=stored))
    return spans


def carried(request, span, subscription):
    """The request with the span's `traceparent` header, unless the subscription opted out."""
    header = tracing.traceparent(span)
    if not header or not subscription.send_trace_context:
        return request
    return replace(request, headers={**request.headers, "traceparent": header})


def ended(tries: list, attempts: dict, written: set[int]) -> None:
    """End each try's span with its outcome (a try that failed inside Herald before sending, which had none, gets
    one now)."""
    if not tracing.on():
        return
    for tried in tries:
        delivery, result = tried.delivery, tried.result
        span = tried.span or tracing.started(SPAN_NAME, delivery.message.trace_parent if delivery.replay_id is None
                                             else "", _attributes(delivery, tried.number),
                                             start_time=int(result.started_at * 1e9))
        attempt = attempts.get(delivery.id)
        finished = result.started_at + result.duration_ms / 1000
        tracing.ended(span, {
            "herald.queue": tried.queue, "herald.outcome": attempt.outcome if attempt is not None else None,
            "herald.recorded": delivery.id in written, "http.response.status_code": result.status,
            "error.type": result.error_class or None}, error=None if result.ok else (result.error_class or "failed"),
            events=(("request sent", int(result.started_at * 1e9)),) if tried.request is not None else (),
            end_time=int(finished * 1e9))


def not_sent(span) -> None:
    """A request the endpoint's send slots never let start: not an attempt; it is due again shortly."""
    tracing.ended(span, {"herald.outcome": "not_sent"})


def trace_id(tried) -> str | None:
    return tracing.trace_id(tried.span)

"""OpenTelemetry traces, optional: `pip install herald-webhooks[otel]`, configured by the standard `OTEL_*`
variables, nothing done when off.

On when, at start-up (`configure`, called as the app is ready, then tracing_setup.py when an exporter is asked for):
- a host project has installed its own tracer provider (its Django instrumentation, `opentelemetry-instrument`):
  Herald's spans go there, joined to the request that published; or
- `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`): Herald sets up the SDK's provider with it (service
  name `OTEL_SERVICE_NAME`, default `herald`; endpoint, headers, sampler and batching from their own `OTEL_*`
  variables; OTLP over HTTP with protobuf).
`OTEL_SDK_DISABLED=true` turns it off whatever else is set. Off (the default), every function here returns at its
first line and no span, context or header is made; the SDK and its exporter are not even imported.

Tracing never fails what it traces: every function here catches its own errors (a bug, a host's span processor
that raises), logs them (once a minute at most) and behaves as if tracing were off for that call.

The spans (docs/operators.md, "Tracing"): one SERVER span per HTTP request of the web process (`POST
/api/topics/{pk}/publish/`, by HTTP's semantic conventions; the request's `traceparent` is its parent), `herald
publish` (producer; the caller's span, or the request's, is its parent), `herald fan-out` under it, and `herald
attempt` (client) per try of each delivery (delivery/engine/sending/spans.py), whose parent is the publish's span
however much later and wherever the try happens: the message stores the publish's `traceparent`
(`Message.trace_parent`).
"""

import functools
import logging
import os
import time
from contextlib import nullcontext

from delivery.conf import VERSION

log = logging.getLogger(__name__)


try:  # the API: present wherever a host project traces
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation import tracecontext as _propagation
except ImportError:
    trace = otel_context = _propagation = None
try:
    from opentelemetry.instrumentation import utils as _instrumentation
except ImportError:
    _instrumentation = None

_state = {"tracer": None, "propagator": None}
TRACEPARENT_MAX = 55  # 00-<32 hex>-<16 hex>-<2 hex>
_complained: dict[str, float] = {}


def _complain(what: str) -> None:
    """Log a failure of tracing's own, once a minute per kind at most (with its traceback)."""
    now = time.monotonic()
    if now - _complained.get(what, -60.0) >= 60:
        _complained[what] = now
        log.exception("tracing failed in %s; the work it traces goes on untraced", what)


def failure_safe(default=None):
    """A tracing function that returns `default` instead of raising."""
    def decorate(function):
        @functools.wraps(function)
        def safe(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except Exception:
                _complain(function.__name__)
                return default
        return safe
    return decorate


class _Contained:
    """A context manager of tracing's, made safe: failing to enter gives None (untraced); failing to exit is
    logged; the body's own exception always goes on as it came."""

    def __init__(self, make, what: str):
        self.make, self.what, self.inner = make, what, None

    def __enter__(self):
        try:
            self.inner = self.make()
            return self.inner.__enter__()
        except Exception:
            self.inner = None
            _complain(self.what)
            return None

    def __exit__(self, kind, value, traceback):
        if self.inner is not None:
            try:
                self.inner.__exit__(kind, value, traceback)
            except Exception:
                _complain(self.what)
        return False


def on() -> bool:
    return _state["tracer"] is not None


def setting(name: str) -> str:
    """An OTEL_* variable, stripped ("" when unset)."""
    return os.environ.get(name, "").strip()


def configure() -> list[str]:
    """Decide once per process whether spans are made (see the module's text): with a host project's own provider,
    at once. Returns the exporters the OTEL_* variables ask Herald to set up the SDK's provider with
    (tracing_setup.py, imported only then: the SDK costs every process ~0.2 s and ~260 modules), else []. Never
    raises: a broken set-up is logged and tracing stays off."""
    if on() or trace is None or setting("OTEL_SDK_DISABLED").lower() == "true":
        return []
    try:
        current = trace.get_tracer_provider()
        if not isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            start(current)  # the host project's own provider
            return []
    except Exception:
        log.exception("tracing could not be set up; it stays off")
        return []
    names = [name.strip() for name in setting("OTEL_TRACES_EXPORTER").split(",") if name.strip()]
    names = [name for name in names if name != "none"]
    if not names and (setting("OTEL_EXPORTER_OTLP_ENDPOINT") or setting("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but OTEL_TRACES_EXPORTER is not: tracing is off "
                    "(set OTEL_TRACES_EXPORTER=otlp to turn it on)")
    return names


def start(provider) -> None:
    """Spans made from now on, by `provider` (a host project's own, or the one tracing_setup.py builds)."""
    _state["tracer"] = provider.get_tracer("herald", VERSION)
    _state["propagator"] = _propagation.TraceContextTextMapPropagator()


def stop() -> None:
    """Tracing off in this process (tests)."""
    _state["tracer"] = None


def _context(traceparent: str | None):
    """The context a span continues: a stored or received `traceparent` (None if it is missing or malformed)."""
    if not traceparent or len(traceparent) > TRACEPARENT_MAX:
        return None
    context = _state["propagator"].extract({"traceparent": traceparent})
    return context if trace.get_current_span(context).get_span_context().is_valid else None


@failure_safe(default="")
def traceparent(span) -> str:
    """The W3C `traceparent` naming `span` ("" for none, or when tracing is off)."""
    if span is None:
        return ""
    found = span.get_span_context()
    if not found.is_valid:
        return ""
    return f"00-{found.trace_id:032x}-{found.span_id:016x}-{int(found.trace_flags):02x}"


@failure_safe()
def trace_id(span) -> str | None:
    """The span's trace id as log lines and trace backends show it."""
    if span is None or not span.get_span_context().is_valid:
        return None
    return f"{span.get_span_context().trace_id:032x}"


def _kept(attributes: dict) -> dict:
    return {key: value for key, value in attributes.items() if value is not None}


def publishing(topic_name: str, count: int, attributes: dict):
    """A `herald publish` span around publishing `count` messages to a topic, current while it lasts (so what
    the publish does is under it, and `current_traceparent` names it), or nothing when tracing is off."""
    tracer = _state["tracer"]
    if tracer is None:
        return nullcontext()
    return _Contained(lambda: tracer.start_as_current_span(
        "herald publish", kind=trace.SpanKind.PRODUCER, record_exception=False, attributes=_kept({
            "messaging.system": "herald", "messaging.operation.type": "send",
            "messaging.destination.name": topic_name, "messaging.batch.message_count": count, **attributes})),
        "publishing")


@failure_safe(default="")
def current_traceparent() -> str:
    """The `traceparent` of the current span ("" when tracing is off or no span is current)."""
    if _state["tracer"] is None:
        return ""
    return traceparent(trace.get_current_span())


class _Attached:
    def __init__(self, context):
        self.context, self.token = context, None

    def __enter__(self):
        self.token = otel_context.attach(self.context)

    def __exit__(self, *exc):
        otel_context.detach(self.token)
        return False


def serving(method: str, attributes: dict, received: str | None):
    """A SERVER span around one HTTP request of the web process (`delivery/web/server_spans.py`), current while it
    lasts, continuing the caller's `traceparent`; nothing when tracing is off or a span is current already (a host
    project's own Django or WSGI instrumentation made one for the request)."""
    tracer = _state["tracer"]
    if tracer is None or trace.get_current_span().get_span_context().is_valid:
        return nullcontext()
    return _Contained(lambda: tracer.start_as_current_span(
        method, context=_context(received), kind=trace.SpanKind.SERVER, record_exception=False,
        attributes=_kept({"http.request.method": method, **attributes})), "serving")


@failure_safe()
def served(span, route: str | None, status: int) -> None:
    """What the request came to: its route (the span is named `METHOD route`, HTTP's semantic conventions) and
    status; a 5xx is an error."""
    if span is None or not span.is_recording():
        return
    if route:
        span.update_name(f"{span.attributes.get('http.request.method', '')} {route}".strip())
    span.set_attributes(_kept({"http.route": route, "http.response.status_code": status}))
    if status >= 500:
        span.set_attributes({"error.type": str(status)})
        span.set_status(trace.Status(trace.StatusCode.ERROR))


def joined(received: str | None):
    """While it lasts, the `traceparent` a caller sent (a REST request's header) is the current context, so a
    publish made meanwhile continues the caller's trace; unless a span is current already (a host project's
    Django instrumentation made one for the request, from the same header)."""
    if _state["tracer"] is None or not received:
        return nullcontext()
    return _Contained(lambda: nullcontext() if trace.get_current_span().get_span_context().is_valid or (
        context := _context(received)) is None else _Attached(context), "joined")


def child(name: str, attributes: dict, *, stored: str | None = None):
    """A span under the current one (or under the stored `traceparent`, a job's), current while it lasts; nothing
    when tracing is off."""
    tracer = _state["tracer"]
    if tracer is None:
        return nullcontext()
    return _Contained(lambda: tracer.start_as_current_span(
        name, context=_context(stored) if stored else None, record_exception=False, attributes=_kept(attributes)),
        name)


@failure_safe()
def annotate(span, attributes: dict) -> None:
    """Add what became known while a span from `publishing` or `child` was current (None: tracing is off)."""
    if span is not None:
        span.set_attributes(_kept(attributes))


@failure_safe()
def started(name: str, stored: str, attributes: dict, *, start_time: int | None = None, linked: str = ""):
    """A client span whose parent is the stored `traceparent` (a root if there is none), started now or at
    `start_time` (ns), linked to the span `linked` names; the caller ends it (`ended`). None when tracing is off."""
    tracer = _state["tracer"]
    if tracer is None:
        return None
    link = _context(linked) if linked else None
    links = [trace.Link(trace.get_current_span(link).get_span_context())] if link is not None else None
    parent = _context(stored)
    return tracer.start_span(name, context=parent if parent is not None else otel_context.Context(),
                             kind=trace.SpanKind.CLIENT, start_time=start_time, links=links,
                             attributes=_kept(attributes))


@failure_safe()
def ended(span, attributes: dict, *, error: str | None = None, events: tuple = (), end_time: int | None = None,
          name: str | None = None) -> None:
    """End a span from `started` with what became of it (a span ended already is left as it is); `error`, the
    error's class: the span's status is ERROR; `name`: the span's name, if it turned out to be another thing."""
    if span is None or not span.is_recording():
        return
    if name:
        span.update_name(name)
    span.set_attributes(_kept(attributes))
    for event, moment in events:
        span.add_event(event, timestamp=moment)
    if error:
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
    span.end(end_time=end_time)


def quiet_http():
    """While it lasts, OpenTelemetry's HTTP client instrumentation (aiohttp, requests), if a host project runs
    it, makes no span and injects no header of its own: Herald's sends carry Herald's attempt span, and the
    header a subscription turned off stays off."""
    if _state["tracer"] is None or _instrumentation is None:
        return nullcontext()
    return _Contained(_instrumentation.suppress_http_instrumentation, "quiet_http")

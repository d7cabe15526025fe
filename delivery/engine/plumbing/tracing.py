"""OpenTelemetry traces, optional: `pip install herald-webhooks[otel]`, configured by the standard `OTEL_*`
variables, nothing done when off.

On when, at start-up (`configure`, called as the app is ready):
- a host project has installed its own tracer provider (its Django instrumentation, `opentelemetry-instrument`):
  Herald's spans go there, joined to the request that published; or
- `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`): Herald sets up the SDK's provider with it (service
  name `OTEL_SERVICE_NAME`, default `herald`; endpoint, protocol, headers, sampler and batching from their own
  `OTEL_*` variables).
`OTEL_SDK_DISABLED=true` turns it off whatever else is set. Off (the default), every function here returns at its
first line and no span, context or header is made.

The spans (docs/operators.md, "Tracing"): `herald publish` (producer; the caller's span, or the request's
`traceparent`, is its parent), `herald fan-out` under it, and `herald attempt` (client) per try of each delivery,
whose parent is the publish's span however much later, wherever, and after however many retries the try happens:
the message stores the publish's `traceparent` (`Message.trace_parent`). The endpoint receives the attempt's own
`traceparent`, so its tracing continues the trace.
"""

import logging
import os
from contextlib import contextmanager, nullcontext

from delivery.conf import VERSION

try:  # the API: what a host project that traces has installed
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - without the extra
    trace = None
try:  # the SDK and its exporters: what Herald sets up when the OTEL_* variables ask for it
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
except ImportError:  # pragma: no cover
    TracerProvider = None
try:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
except ImportError:  # pragma: no cover
    HttpExporter = None
try:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
except ImportError:
    GrpcExporter = None

log = logging.getLogger(__name__)
_state = {"tracer": None, "propagator": None}
TRACEPARENT_MAX = 55  # 00-<32 hex>-<16 hex>-<2 hex>


def on() -> bool:
    return _state["tracer"] is not None


def _setting(name: str) -> str:
    return os.environ.get(name, "").strip()


def configure() -> None:
    """Decide once per process whether spans are made (see the module's text), and set up the SDK's provider
    when the OTEL_* variables ask Herald to. Never raises: a broken tracing set-up is logged and tracing stays
    off; deliveries never depend on it."""
    if on() or trace is None or _setting("OTEL_SDK_DISABLED").lower() == "true":
        return
    try:
        current = trace.get_tracer_provider()
        if not isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            _start(current)  # the host project's own provider
            return
        names = [name.strip() for name in _setting("OTEL_TRACES_EXPORTER").split(",") if name.strip()]
        names = [name for name in names if name != "none"]
        if not names:
            return
        if TracerProvider is None:
            log.warning("OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is not installed; tracing is off "
                        "(pip install herald-webhooks[otel])")
            return
        exporters = [exporter for exporter in map(_exporter, names) if exporter is not None]
        if not exporters:
            return
        service = _setting("OTEL_SERVICE_NAME") or "herald"
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        for exporter in exporters:
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _start(trace.get_tracer_provider())
        log.info("tracing on: exporting to %s as service %r", ", ".join(names), service)
    except Exception:
        log.exception("tracing could not be set up; it stays off")


def _exporter(name: str):
    if name == "console":
        return ConsoleSpanExporter()
    if name != "otlp":
        log.warning("OTEL_TRACES_EXPORTER=%s: Herald knows otlp and console; %s is left out", name, name)
        return None
    protocol = _setting("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or _setting("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol == "grpc":
        if GrpcExporter is None:
            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc; tracing "
                        "is off (or use http/protobuf, which herald-webhooks[otel] installs)")
            return None
        return GrpcExporter()
    if HttpExporter is None:
        log.warning("OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http; tracing is off "
                    "(pip install herald-webhooks[otel])")
        return None
    return HttpExporter()


def _start(provider) -> None:
    _state["tracer"] = provider.get_tracer("herald", VERSION)
    _state["propagator"] = TraceContextTextMapPropagator()


def stop() -> None:
    """Tracing off in this process (tests)."""
    _state["tracer"] = None


def _context(traceparent: str | None):
    """The context a span continues: a stored or received `traceparent` (None if it is missing or malformed)."""
    if not traceparent or len(traceparent) > TRACEPARENT_MAX:
        return None
    context = _state["propagator"].extract({"traceparent": traceparent})
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def traceparent(span) -> str:
    """The W3C `traceparent` naming `span` ("" for none, or when tracing is off)."""
    if span is None:
        return ""
    found = span.get_span_context()
    if not found.is_valid:
        return ""
    return f"00-{found.trace_id:032x}-{found.span_id:016x}-{int(found.trace_flags):02x}"


def trace_id(span) -> str | None:
    """The span's trace id as log lines and trace backends show it."""
    if span is None or not span.get_span_context().is_valid:
        return None
    return f"{span.get_span_context().trace_id:032x}"


def publishing(topic_name: str, count: int, attributes: dict):
    """A `herald publish` span around publishing `count` messages to a topic, current while it lasts (so what
    the publish does is under it, and `current_traceparent` names it), or nothing when tracing is off."""
    tracer = _state["tracer"]
    if tracer is None:
        return nullcontext()
    return tracer.start_as_current_span("herald publish", kind=SpanKind.PRODUCER, attributes={
        "messaging.system": "herald", "messaging.operation.type": "send", "messaging.destination.name": topic_name,
        "messaging.batch.message_count": count,
        **{key: value for key, value in attributes.items() if value is not None}})


def current_traceparent() -> str:
    """The `traceparent` of the current span ("" when tracing is off or no span is current)."""
    if _state["tracer"] is None:
        return ""
    return traceparent(trace.get_current_span())


@contextmanager
def _joined(context):
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


def joined(received: str | None):
    """While it lasts, the `traceparent` a caller sent (a REST request's header) is the current context, so a
    publish made meanwhile continues the caller's trace; unless a span is current already (a host project's
    Django instrumentation made one for the request, from the same header)."""
    if _state["tracer"] is None or not received or trace.get_current_span().get_span_context().is_valid:
        return nullcontext()
    context = _context(received)
    return _joined(context) if context is not None else nullcontext()


def child(name: str, attributes: dict, *, stored: str | None = None):
    """A span under the current one (or under the stored `traceparent`, a job's), current while it lasts; nothing
    when tracing is off."""
    tracer = _state["tracer"]
    if tracer is None:
        return nullcontext()
    return tracer.start_as_current_span(name, context=_context(stored) if stored else None, attributes={
        key: value for key, value in attributes.items() if value is not None})


def started(name: str, stored: str, attributes: dict, *, start_time: int | None = None, linked: str = ""):
    """A client span whose parent is the stored `traceparent` (a root if there is none), started now or at
    `start_time` (ns), linked to the span `linked` names; the caller ends it (`ended`). None when tracing is off."""
    tracer = _state["tracer"]
    if tracer is None:
        return None
    link = _context(linked) if linked else None
    links = [Link(trace.get_current_span(link).get_span_context())] if link is not None else None
    parent = _context(stored)
    return tracer.start_span(name, context=parent if parent is not None else otel_context.Context(),
                             kind=SpanKind.CLIENT,
                             start_time=start_time, links=links,
                             attributes={key: value for key, value in attributes.items() if value is not None})


def ended(span, attributes: dict, *, error: str | None = None, events: tuple = (), end_time: int | None = None):
    """End a span from `started` with what became of it; `error`, the error's class: the span's status is ERROR."""
    if span is None:
        return
    span.set_attributes({key: value for key, value in attributes.items() if value is not None})
    for name, moment in events:
        span.add_event(name, timestamp=moment)
    if error:
        span.set_status(Status(StatusCode.ERROR, error))
    span.end(end_time=end_time)

"""Turning tracing on, once per process as the app is ready (engine/plumbing/tracing.py makes the spans): with a
host project's own tracer provider when it installed one, else with the SDK's, set up from the standard OTEL_*
variables when they name an exporter (`otlp` over HTTP with protobuf, or `console`). Never raises: a broken set-up
is logged and tracing stays off.
"""

import logging
import os

from delivery.engine.plumbing import tracing
from delivery.engine.plumbing.tracing import trace

try:  # the SDK and its OTLP exporter: the `otel` extra, used when the OTEL_* variables ask Herald to export
    from opentelemetry.sdk import resources as sdk_resources
    from opentelemetry.sdk import trace as sdk
    from opentelemetry.sdk.trace import export as sdk_export
except ImportError:
    sdk = sdk_resources = sdk_export = None
try:
    from opentelemetry.exporter.otlp.proto.http import trace_exporter as otlp
except ImportError:
    otlp = None

log = logging.getLogger(__name__)


def _setting(name: str) -> str:
    return os.environ.get(name, "").strip()


def configure() -> None:
    """Decide once per process whether spans are made (see the module's text), and set up the SDK's provider
    when the OTEL_* variables ask Herald to. Never raises: a broken set-up is logged and tracing stays off."""
    if tracing.on() or trace is None or _setting("OTEL_SDK_DISABLED").lower() == "true":
        return
    try:
        current = trace.get_tracer_provider()
        if not isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            tracing.start(current)  # the host project's own provider
            return
        names = [name.strip() for name in _setting("OTEL_TRACES_EXPORTER").split(",") if name.strip()]
        names = [name for name in names if name != "none"]
        if not names:
            if _setting("OTEL_EXPORTER_OTLP_ENDPOINT") or _setting("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
                log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but OTEL_TRACES_EXPORTER is not: tracing is off "
                            "(set OTEL_TRACES_EXPORTER=otlp to turn it on)")
            return
        if sdk is None:
            log.warning("OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is not installed; tracing is off "
                        "(pip install herald-webhooks[otel])")
            return
        exporters = [exporter for exporter in map(_exporter, names) if exporter is not None]
        if not exporters:
            return
        resource = sdk_resources.Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(sdk_resources.Resource({"service.name": "herald"}))
        provider = sdk.TracerProvider(resource=resource)
        for exporter in exporters:
            provider.add_span_processor(sdk_export.BatchSpanProcessor(exporter))
        # Herald's own, not the process's global provider: a host project that sets up its own later (in its
        # AppConfig.ready(), a gunicorn post_fork) is not refused, and its spans are not named after Herald.
        tracing.start(provider)
        log.info("tracing on: exporting to %s as service %r", ", ".join(names), resource.attributes["service.name"])
    except Exception:
        log.exception("tracing could not be set up; it stays off")


def _exporter(name: str):
    if name == "console":
        return sdk_export.ConsoleSpanExporter()
    if name != "otlp":
        log.warning("OTEL_TRACES_EXPORTER=%s: Herald knows otlp and console; %s is left out", name, name)
        return None
    protocol = _setting("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or _setting("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol not in ("", "http/protobuf"):
        # gRPC channels do not survive gunicorn's fork of its workers after the app is loaded; OTLP/JSON is not
        # in the Python exporter. Collectors take OTLP/HTTP with protobuf on port 4318.
        log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: Herald exports OTLP over HTTP with protobuf "
                    "(http/protobuf); tracing is off", protocol)
        return None
    if otlp is None:
        log.warning("OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http; tracing is off "
                    "(pip install herald-webhooks[otel])")
        return None
    return otlp.OTLPSpanExporter()

"""The SDK's tracer provider, set up from the standard OTEL_* variables when they name an exporter (`otlp` over HTTP
with protobuf, or `console`): imported by the app's ready() only then (tracing.configure decides), so a process
that does not export never imports the SDK. Never raises: a broken set-up is logged and tracing stays off.
"""

import logging

from delivery.engine.plumbing import tracing

_IMPORT_PROBLEM = [""]
try:  # the SDK and its OTLP exporter: the `otel` extra (a broken install, a protobuf clash, is tracing's problem)
    from opentelemetry.sdk import resources as sdk_resources
    from opentelemetry.sdk import trace as sdk
    from opentelemetry.sdk.trace import export as sdk_export
except ImportError:
    sdk = sdk_resources = sdk_export = None
except Exception as exc:  # noqa: BLE001 (whatever a half-installed package raises: tracing's problem alone)
    sdk = sdk_resources = sdk_export = None
    _IMPORT_PROBLEM[0] = f"{type(exc).__name__}: {exc}"[:200]
try:
    from opentelemetry.exporter.otlp.proto.http import trace_exporter as otlp
except Exception:  # noqa: BLE001
    otlp = None

log = logging.getLogger(__name__)


def start_sdk(names: list[str]) -> None:
    """Set up the SDK's provider with the exporters `names` (tracing.configure's answer). Never raises: a broken
    set-up, the SDK missing or failing to import, is logged and tracing stays off."""
    if sdk is None:
        found = f"could not be imported ({_IMPORT_PROBLEM[0]})" if _IMPORT_PROBLEM[0] else "is not installed"
        log.warning("OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK %s; tracing is off "
                    "(pip install herald-webhooks[otel])", found)
        return
    try:
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
    protocol = tracing.setting("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or tracing.setting("OTEL_EXPORTER_OTLP_PROTOCOL")
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

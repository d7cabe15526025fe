"""An OTLP/HTTP trace receiver for tests: what a collector would get from Herald's processes, decoded with
`opentelemetry-proto` (OTLP/HTTP's protobuf encoding, as the exporter sends it)."""

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@dataclass
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    attributes: dict
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    events: list[str]
    links: list[tuple[str, str]]  # (trace id, span id)
    start_ns: int
    end_ns: int


@dataclass
class Collector:
    spans: list[Span] = field(default_factory=list)
    bodies: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def take(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(Span(
                        service=resource.get("service.name", ""), name=span.name, trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(), parent_id=span.parent_span_id.hex(), kind=KINDS[span.kind],
                        attributes={a.key: _value(a.value) for a in span.attributes}, status=span.status.code,
                        status_message=span.status.message, events=[event.name for event in span.events],
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                        start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano))
        with self.lock:
            self.spans += found
            self.bodies += 1

    def named(self, name: str, trace_id: str | None = None) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.name == name and (trace_id is None or s.trace_id == trace_id)]


def serve() -> tuple[ThreadingHTTPServer, Collector]:
    """A receiver on 127.0.0.1 (a free port); `collector.url` is what OTEL_EXPORTER_OTLP_ENDPOINT takes."""
    collector = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            collector.take(request)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    collector.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, collector

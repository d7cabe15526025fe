"""A real HTTP receiver on 127.0.0.1 for tests: records every request, answers from a script."""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cloudevents.core.bindings.http import HTTPMessage, from_http_event


@dataclass
class Received:
    at: float  # time.time() when the request arrived
    path: str
    headers: dict
    body: bytes
    method: str = "POST"

    def json(self):
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b'{"ok":true}'
    headers: dict = field(default_factory=dict)
    delay: float = 0.0


class Receiver:
    """`script` is a list of Replies used in order (the last one repeats), or a callable(Received) -> Reply."""

    def __init__(self, ssl_context=None):
        self.scheme = "https" if ssl_context else "http"
        self.requests: list[Received] = []
        self.script = [Reply()]
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def setup(self):
                # TLS: the handshake happens here, in the request's thread, not in the accept of the server's loop,
                # so a client that connects and never finishes its handshake cannot stall the server (or its close).
                if ssl_context is not None:
                    self.request.settimeout(10)
                    self.request.do_handshake()
                super().setup()

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                received = Received(time.time(), self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                                    self.command)
                reply = receiver.reply_for(received)
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST  # a page a browser opens: the shop's own app, in the portal's browser tests
            do_PUT = do_POST  # a transformation's method

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True,
                                                         do_handshake_on_connect=False)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}/hook"

    def reply_for(self, received: Received) -> Reply:
        with self.lock:
            index = len(self.requests)
            self.requests.append(received)
            self.arrived.notify_all()
        if callable(self.script):
            return self.script(received)
        return self.script[min(index, len(self.script) - 1)]

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"expected {count} requests, got {len(self.requests)} in {timeout}s")
                self.arrived.wait(remaining)
            return list(self.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def parse_cloudevent(request: Received) -> tuple[dict, object]:
    """Parse a request with the CloudEvents SDK (structured or binary mode): (attributes, data)."""
    event = from_http_event(HTTPMessage(headers=request.headers, body=request.body))
    return event.get_attributes(), event.get_data()

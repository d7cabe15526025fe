"""The chaos run's receivers: one process, two ports, each path an endpoint with its own manners.

    python -m tests.chaos.receivers LOG PORT FLAKY_PORT

Every request that arrives is logged as one JSON line (path, webhook-id, herald-attempt, what was answered), so the
harness can count what each endpoint saw. FLAKY_PORT closes its listener for 3 s of every 10 (connection refused).
"""

import json
import random
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# path -> how that endpoint behaves; the harness subscribes exactly these
MANNERS = {
    "polite": "polite", "polite-2": "polite", "polite-3": "polite", "polite-4": "polite",
    "flaky-5xx": "flaky5xx", "flaky-5xx-2": "flaky5xx", "slow": "slow", "slow-2": "slow",
    "reset": "reset", "reset-2": "reset", "poison": "poison", "poison-2": "poison",
    "garbage": "garbage", "retry-after": "retry_after", "gone-wrong": "dead",
    "polite-5": "polite", "polite-6": "polite", "flaky-5xx-3": "flaky5xx",
    # ordered delivery (one per topic): the log records each request's message number, to check the order
    "ordered-0": "flaky5xx", "ordered-1": "flaky5xx", "ordered-2": "flaky5xx", "ordered-3": "flaky5xx",
}
REFUSING = ["refusing", "refusing-2"]  # served on FLAKY_PORT
SLOW_SECONDS = 1.6  # past the chaos policy's 1 s timeout


class Log:
    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, **entry):
        with self.lock:
            self.file.write(json.dumps(entry) + "\n")


def handler_for(log: Log, rng: random.Random):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            name = self.path.strip("/").split("/")[-1]
            manner = "polite" if name in REFUSING else MANNERS.get(name, "polite")
            answer = "broken pipe"  # the client gave up before the answer was written
            try:
                answer = getattr(self, f"answer_{manner}")(rng.random())
            finally:
                number = json.loads(body)["data"]["n"] if name.startswith("ordered-") else None
                log.write(path=name, id=self.headers.get("webhook-id"), attempt=self.headers.get("herald-attempt"),
                          answered=answer, at=time.time(), size=len(body), n=number)

        def reply(self, status: int, headers: dict | None = None, body: bytes = b"ok") -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def answer_polite(self, roll):
            self.reply(200)
            return "ok"

        def answer_flaky5xx(self, roll):
            if roll < 0.3:
                self.reply(503, body=b"busy")
                return "5xx"
            return self.answer_polite(roll)

        def answer_slow(self, roll):
            if roll < 0.1:
                time.sleep(SLOW_SECONDS)
                self.reply(200)  # the client has given up by now: usually a broken pipe
                return "late"
            return self.answer_polite(roll)

        def answer_reset(self, roll):
            if roll < 0.15:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return "reset"
            return self.answer_polite(roll)

        def answer_poison(self, roll):
            if roll < 0.15:  # HTTP forbids NUL in a field value: not a valid answer, so not a 2xx (RFC 9110 5.5)
                self.reply(200, {"X-Nul": "a\x00b"}, body=b"ok")
                return "invalid"
            if roll < 0.3:
                huge = {f"X-Huge-{n}": "v" * 20_000 for n in range(30)}
                self.reply(200, huge, body=b"\x00\xff\xfe not text \x00")
                return "ok"
            return self.answer_polite(roll)

        def answer_garbage(self, roll):
            if roll < 0.1:
                self.wfile.write(b"HTTP/1.1 2x0 WHAT\r\n\x00\x00garbage\r\n\r\n")
                self.close_connection = True
                return "garbage"
            return self.answer_polite(roll)

        def answer_retry_after(self, roll):
            if roll < 0.2:
                self.reply(429, {"Retry-After": "1"})
                return "429"
            return self.answer_polite(roll)

        def answer_dead(self, roll):
            self.reply(500, body=b"always broken")
            return "5xx"

        def log_message(self, *args):
            pass

    return Handler


class Server(ThreadingHTTPServer):
    request_queue_size = 1024  # a production server's listen backlog, not socketserver's 5


def serve(port: int, log: Log, rng: random.Random) -> ThreadingHTTPServer:
    server = Server(("127.0.0.1", port), handler_for(log, rng))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(log_path: str, port: int, flaky_port: int) -> None:
    log, rng = Log(log_path), random.Random(7)
    serve(port, log, rng)
    while True:  # the flaky port: up 7 s, refusing 3 s
        flaky = serve(flaky_port, log, rng)
        time.sleep(7)
        flaky.shutdown()
        flaky.server_close()
        time.sleep(3)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

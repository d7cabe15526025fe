"""A demo webhook receiver for trying Herald locally: prints each request whole (one block per request, never
interleaved), verifies signatures with `--secret`, answers 2xx, and confirms subscriptions."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.core.management.base import BaseCommand

from delivery.rules import signing

PRINT_LOCK = threading.Lock()
BODY_SHOWN = 4000


MAX_BODY_BYTES = 64 * 1024 * 1024


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    fail_status = 0
    secrets: tuple[str, ...] = ()

    def do_POST(self):
        declared = self.headers.get("Content-Length", "0") or "0"
        if not declared.isascii() or not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
            self.refuse(f"Content-Length must be a number of bytes up to {MAX_BODY_BYTES}, not {declared[:40]!r}")
            return
        body = self.rfile.read(int(declared))
        verdict, status = "", self.fail_status or 200
        if self.secrets:
            problem = signing.check(self.secrets, self.headers.get("webhook-id"),
                                    self.headers.get("webhook-timestamp"), self.headers.get("webhook-signature"),
                                    body, now=time.time())
            verdict = "signature: valid" if problem is None else f"signature: INVALID ({problem}); answering 401"
            status = 401 if problem else status
        answer = b'{"ok":true}' if status < 400 else b'{"error":"refused"}'
        try:
            event = json.loads(body)
        except ValueError:
            event = None
        if status != 401 and isinstance(event, dict) and event.get("type") == "herald.subscription.confirmation":
            data = event.get("data")
            if not isinstance(data, dict) or not isinstance(data.get("token"), str):
                self.refuse("a confirmation's data must be an object with a token")
                return
            answer, status = json.dumps({"validationResponse": data["token"]}).encode(), 200
            verdict += "\nconfirmation: answered with the token (the subscription is now confirmed)"
        text = body.decode("utf-8", errors="replace")
        if len(text) > BODY_SHOWN:
            text = text[:BODY_SHOWN] + f"\n… ({len(body)} bytes in all)"
        block = [f"=== {time.strftime('%H:%M:%S')} {self.command} {self.path} → answering {status}"]
        block += [f"{name}: {value}" for name, value in self.headers.items()]
        block += ["", text]
        if verdict:
            block += [verdict.strip()]
        with PRINT_LOCK:  # one request's block at a time, whatever arrives concurrently
            print("\n".join(block) + "\n", flush=True)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def refuse(self, why: str) -> None:
        """A malformed request: 400 saying why, and the connection closed (its body may be unread)."""
        answer = json.dumps({"error": why}).encode()
        with PRINT_LOCK:
            print(f"=== {time.strftime('%H:%M:%S')} {self.command} {self.path} → answering 400: {why}\n", flush=True)
        self.close_connection = True
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class Command(BaseCommand):
    help = "Run a local webhook receiver that prints what Herald sends (for trying Herald out)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=9000)
        parser.add_argument("--fail-with", type=int, default=0, help="Answer this status instead of 200.")
        parser.add_argument("--secret", action="append", default=[], metavar="WHSEC",
                            help="Verify each request's webhook-signature with this signing secret (the one the "
                                 "subscription's creation returned); give it twice during a rotation. Requests "
                                 "that fail get 401.")

    def handle(self, *args, port, fail_with, secret, **options):
        Handler.fail_status = fail_with
        Handler.secrets = tuple(secret)
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        checking = " verifying signatures" if secret else ""
        self.stdout.write(f"receiving webhooks on http://127.0.0.1:{port}/{checking} (Ctrl-C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            server.server_close()

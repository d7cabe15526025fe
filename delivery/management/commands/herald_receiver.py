"""A demo webhook receiver for trying Herald locally: prints each request, answers 2xx, confirms subscriptions."""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.core.management.base import BaseCommand


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    fail_status = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        print(f"--- {self.command} {self.path}  webhook-id={self.headers.get('webhook-id')} "
              f"attempt={self.headers.get('herald-attempt')}", flush=True)
        print(body.decode("utf-8", errors="replace")[:2000], flush=True)
        answer, status = b'{"ok":true}', self.fail_status or 200
        try:
            event = json.loads(body)
        except ValueError:
            event = None
        if isinstance(event, dict) and event.get("type") == "herald.subscription.confirmation":
            answer, status = json.dumps({"validationResponse": event["data"]["token"]}).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class Command(BaseCommand):
    help = "Run a local webhook receiver that prints what Herald sends (for trying Herald out)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=9000)
        parser.add_argument("--fail-with", type=int, default=0, help="Answer this status instead of 200.")

    def handle(self, *args, port, fail_with, **options):
        Handler.fail_status = fail_with
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.stdout.write(f"receiving webhooks on http://127.0.0.1:{port}/ (Ctrl-C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            server.server_close()

"""`make run`'s last word: once the web server answers and a worker is listening, print where to go and what to
type next (the admin, its user, the API token, the receiver and the walkthrough), after the processes' start-up
logs rather than before them. Then it stays up quietly (honcho stops everything when one process exits)."""

import os
import signal
import threading
import time
import urllib.error
import urllib.request

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rq import Worker

from delivery.engine.plumbing import redis_link
from delivery.rules.vocabulary import AttemptQueue


def web_answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)  # noqa: S310 (a fixed local URL)
        return True
    except urllib.error.HTTPError:
        return True  # 401 and the like: it answers
    except OSError:
        return False


def worker_listening() -> bool:
    try:
        return bool(Worker.all(connection=redis_link.queue(AttemptQueue.DELIVERIES).connection))
    except Exception:
        return False


def redis_in_use() -> str:
    """Which Redis the processes use: its address, version and executable (from INFO server)."""
    connection = redis_link.queue(AttemptQueue.DELIVERIES).connection
    info = connection.info("server")
    where = connection.connection_pool.connection_kwargs
    return (f"{where.get('host', '?')}:{where.get('port', '?')}  version {info.get('redis_version', '?')}  "
            f"{info.get('executable') or '(executable not reported)'}")


class Command(BaseCommand):
    help = "Wait until Herald's web server and a worker are up, then print how to use them."

    def add_arguments(self, parser):
        parser.add_argument("--url", default=f"http://127.0.0.1:{os.environ.get('HERALD_PORT', '8000')}")
        parser.add_argument("--timeout", type=float, default=120)
        parser.add_argument("--exit", action="store_true", help="Exit after printing (default: stay up).")

    def handle(self, *args, url, timeout, exit, **options):
        deadline = time.monotonic() + timeout
        while True:
            # The admin's login page answers 200 without a token: waiting for the web server logs no 401s.
            if web_answers(url + reverse("admin:login")) and worker_listening():
                try:
                    self.stdout.write(self.banner(url))
                    break
                except Exception as exc:  # the database went away in between: it is a banner, try again
                    self.stderr.write(f"(banner: {exc}; trying again)")
            if time.monotonic() > deadline:
                self.stderr.write(f"Herald did not come up within {timeout:g} s; see the logs above.")
                break
            time.sleep(0.5)
        if not exit:
            stop = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
            stop.wait()

    def banner(self, url: str) -> str:
        user = get_user_model().objects.filter(username="admin").first()
        token = Token.objects.filter(user=user).first() if user else None
        password = os.environ.get("HERALD_DEMO_PASSWORD", "herald-demo (unless you changed it)")
        lines = [
            "Herald is ready.",
            f"  dashboard  {url}{reverse('herald:dashboard')}   (user admin, password {password})",
            f"  API        {url}{reverse('herald:api-root')}   docs {url}{reverse('herald:api-docs')}",
            f"  API token  {token.key if token else '(run: python manage.py herald_demo)'}",
            f"  Redis      {redis_in_use()}",
            "  next       in a second terminal:  make receiver",
            "             in a third: the walkthrough in README.md (TOKEN=the token above)",
        ]
        width = max(len(line) for line in lines) + 2
        rule = "=" * width
        return "\n".join([rule, *lines, rule])

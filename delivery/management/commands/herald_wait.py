"""Wait until PostgreSQL and Redis answer (a convenience for scripts: Herald's processes wait by themselves)."""

import signal
import time

from django.core.management.base import BaseCommand, CommandError

from delivery.engine.plumbing import availability


class Command(BaseCommand):
    help = "Wait until the database and Redis are reachable (forever, or --timeout seconds)."

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=None, help="Give up after this many seconds.")

    def handle(self, *args, timeout, **options):
        deadline = None if timeout is None else time.monotonic() + timeout
        asked = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: asked.append(True))

        def stopping() -> bool:
            return bool(asked) or (deadline is not None and time.monotonic() >= deadline)

        if availability.wait(stopping=stopping):
            return
        if asked:
            raise CommandError("stopped while waiting for the database and Redis")
        away = ", ".join(dependency.describe() for dependency in availability.unreachable())
        raise CommandError(f"not reachable after {timeout:g} s: {away or 'nothing (it just came back)'}")

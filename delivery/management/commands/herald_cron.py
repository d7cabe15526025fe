"""The scheduler process: dispatch due retries and reconcile, about every HERALD_DISPATCH_INTERVAL_SECONDS.

It sleeps until the next retry is due (or a worker wakes it), so a retry is queued at its time, not up to an
interval late. Several may run at once: each tick takes rows with SKIP LOCKED.
"""

import logging
import signal
import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from delivery.conf import herald
from delivery.engine import dispatch, retention

log = logging.getLogger("herald.cron")


class Command(BaseCommand):
    help = "Run Herald's dispatcher, reconciler and retention ticks until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Run one tick of everything and exit.")

    def handle(self, *args, once=False, **options):
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        interval = herald.DISPATCH_INTERVAL_SECONDS
        last_reconcile = last_retention = 0.0
        self.stdout.write(f"herald cron: dispatching every ≤{interval}s")
        while not stopping:
            try:
                close_old_connections()
                dispatch.dispatch_due()
                if time.monotonic() - last_reconcile >= herald.RECONCILE_INTERVAL_SECONDS or once:
                    dispatch.reconcile()
                    last_reconcile = time.monotonic()
                if time.monotonic() - last_retention >= 3600 or once:
                    retention.purge()
                    last_retention = time.monotonic()
                if once:
                    return
                dispatch.sleep_until_due(interval)
            except KeyboardInterrupt:
                return
            except Exception:  # a database or Redis outage must not end the scheduler
                log.exception("cron tick failed; retrying")
                time.sleep(interval)

"""The scheduler process: dispatch due retries and reconcile, about every HERALD_DISPATCH_INTERVAL_SECONDS.

It sleeps until the next retry is due (or a worker wakes it), so a retry is queued at its time, not up to an
interval late. Several may run at once: each tick takes rows with SKIP LOCKED.

It waits for PostgreSQL and Redis before its first tick and whenever a tick fails because one of them went away
(one log line per change of state, capped backoff); it exits only when asked (SIGTERM/SIGINT) or with --once.
"""

import logging
import signal
import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from delivery import heartbeat
from delivery.conf import herald
from delivery.engine.plumbing import availability, clock, counters
from delivery.engine.scheduler import dispatch, retention

log = logging.getLogger("herald.cron")


class Command(BaseCommand):
    help = "Run Herald's scheduler: dispatch, reconcile and retention ticks until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Run one tick of everything and exit.")

    def handle(self, *args, once=False, **options):
        stopping = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.append(True))
        counters.buffer()  # the operators' counters, added to Redis once a second
        interval = herald.DISPATCH_INTERVAL_SECONDS
        last_reconcile = last_retention = 0.0
        waited = False  # whether this tick's dependencies were looked at since the last failure
        ready = False
        while not stopping:
            heartbeat.beat(heartbeat.SCHEDULER)  # `manage.py herald_alive --scheduler`
            if not waited and not availability.wait(stopping=lambda: bool(stopping),
                                                    while_waiting=lambda: heartbeat.beat(heartbeat.SCHEDULER)):
                return
            waited = True
            if not ready:  # said once PostgreSQL and Redis answer: from here on, retries go out at their time
                self.stdout.write(f"herald cron: dispatching every ≤{interval}s")
                self.stdout.flush()
                ready = True
            try:
                close_old_connections()
                dispatched_at = clock.now()
                dispatch.dispatch_due(dispatched_at)
                if time.monotonic() - last_reconcile >= herald.RECONCILE_INTERVAL_SECONDS or once:
                    dispatch.reconcile()
                    last_reconcile = time.monotonic()
                if time.monotonic() - last_retention >= 3600 or once:
                    retention.purge()
                    last_retention = time.monotonic()
                if once:
                    return
                if availability.anything_down():  # a tick went on without Redis: is it back? (logged once)
                    availability.unreachable()
                dispatch.sleep_until_due(interval, dispatched_at)
            except Exception as exc:
                waited = False
                if availability.is_outage(exc) and availability.unreachable():
                    continue  # the wait at the top logs what is away and returns once it answers
                log.exception("cron tick failed; retrying")  # not an outage: show it, and do not spin
                time.sleep(interval)

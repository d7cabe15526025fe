"""gunicorn's settings for Herald's web process: `gunicorn project.wsgi -c python:project.gunicorn`.

Before gunicorn forks its workers, the master waits for PostgreSQL and Redis (one log line per change of state,
capped backoff) instead of serving errors or exiting; SIGTERM/SIGINT while it waits ends it. Once it serves, an
outage is answered per request with 503 and Retry-After (delivery/web/api/errors.py) and the process stays up.
"""

import os
import signal
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django.setup()

from django.db import connections  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from delivery import heap  # noqa: E402
from delivery.engine.plumbing import availability, counters  # noqa: E402


def on_starting(server):
    asked = []
    previous = {sig: signal.signal(sig, lambda *_: asked.append(True)) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if not availability.wait(stopping=lambda: bool(asked)):
            sys.exit(0)
    finally:
        connections.close_all()  # the workers are forked from here: none may inherit a connection
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def warm() -> None:
    """What Django otherwise does on a worker's first request: import the URLconf, and with it every view, DRF and
    the schema generator. Done once here, the forked workers share it; done in each worker, it held that worker's
    first requests for about 0.3 s, and the requests queued behind them (a steady stream's publish p99)."""
    len(get_resolver().url_patterns)  # the property imports them


warm()


def pre_fork(server, worker):
    heap.freeze()  # in the master: what start-up built is not the collector's to walk again (delivery/heap.py)


def post_fork(server, worker):
    heap.collect_less_often()
    counters.buffer()  # each web worker adds its operators' counters to Redis once a second, not two per publish

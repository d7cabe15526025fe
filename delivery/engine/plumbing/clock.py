"""The one clock every Herald process schedules by: PostgreSQL's.

Due times, leases, retry delays and the reconciler's "this lease has expired" are comparisons between times written
by one process and read by another, often on another host. Each host's clock may be off by seconds (NTP keeps
them close, not equal). Were each process to use its own clock, a worker whose clock runs 3 s ahead would claim
retries 3 s early, and a reconciler whose clock runs ahead would take back leases of sends still in progress.

So `now()` is the database server's clock, as seen from this process: its own clock plus an offset measured
against `clock_timestamp()` (the midpoint of the round trip; the error is at most half of it, a millisecond on a
LAN) every `REFRESH_SECONDS`. When the database cannot be reached, the last offset is kept (a clock does not jump
in a minute) and measured again once it answers. SQLite runs on this machine: no offset.

Where the engine still uses the local clock, it is safe:
- `time.monotonic()` for durations, timeouts and sleeps: intervals on one host, not instants shared with another;
- the `started_at` of an attempt (`time.time()` in the sender) is what the log shows, never compared with a due
  time; the attempt's `created_at` and every due time come from `now()`.
"""

import logging
import threading
import time
from datetime import datetime, timedelta

from django.db import DatabaseError, connection
from django.db.transaction import TransactionManagementError
from django.utils import timezone

log = logging.getLogger(__name__)
REFRESH_SECONDS = 60.0
RETRY_SECONDS = 5.0  # after a failed measurement
TRUSTED_ROUND_TRIP_SECONDS = 0.5  # a slower round trip says little about the offset: keep the last one
REPORT_OFFSET_SECONDS = 1.0  # an offset this large is logged (once per measurement): the host's clock is off

_lock = threading.Lock()
_offset = timedelta(0)
_next_measure = 0.0  # time.monotonic() of the next measurement


def now() -> datetime:
    """The current time by the database's clock (aware, UTC)."""
    if time.monotonic() >= _next_measure:
        _measure()
    return timezone.now() + _offset


def offset() -> timedelta:
    """The database's clock minus this host's, as last measured."""
    return _offset


def _measure() -> None:
    global _offset, _next_measure
    with _lock:
        if time.monotonic() < _next_measure:
            return
        _next_measure = time.monotonic() + RETRY_SECONDS
        if connection.vendor != "postgresql":
            _next_measure = time.monotonic() + REFRESH_SECONDS
            return
        try:
            before = time.time()
            with connection.cursor() as cursor:
                cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
                database = float(cursor.fetchone()[0])
            after = time.time()
        except (DatabaseError, TransactionManagementError):  # unreachable, or a failed transaction: keep the offset
            return
        if after - before > TRUSTED_ROUND_TRIP_SECONDS:
            return
        _offset = timedelta(seconds=database - (before + after) / 2)
        _next_measure = time.monotonic() + REFRESH_SECONDS
        if abs(_offset.total_seconds()) >= REPORT_OFFSET_SECONDS:
            log.warning("this host's clock is %.3f s %s the database's; Herald schedules by the database's",
                        abs(_offset.total_seconds()), "behind" if _offset > timedelta(0) else "ahead of")

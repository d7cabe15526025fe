"""Operator counters and histograms that only grow, shared by every process on every host through Redis.

Prometheus needs counters that never decrease (`rate()`), and histograms. Herald's processes are many (web, any
number of workers, the scheduler) on any number of hosts, so an in-process counter would each hold a slice, and
PostgreSQL's rows cannot count what retention already deleted. So each process tallies what it did (after its
commit: a change that rolled back is not counted) and adds the tally to a Redis hash once a second, and the scrape
reads the hash (delivery/web/prometheus.py). A lost Redis resets them, which Prometheus reads as a counter
reset, as it does a restart. Adding never fails the caller: a Redis error is logged and the tally waits.

Labels are bounded: outcome, error class, queue, status. Never a tenant or an owner (the scrape's per-owner gauges
come from PostgreSQL; per-tenant figures answer through the API). Histograms keep non-cumulative bucket counts;
the scrape sums them into Prometheus's cumulative form.
"""

import atexit
import bisect
import logging
import os
import threading
import time
from collections import Counter

from redis.exceptions import RedisError

from delivery.engine.plumbing import redis_link
from delivery.engine.plumbing.after_commit import after_commit

log = logging.getLogger(__name__)

COUNTERS = "herald:metrics:counters"
HISTOGRAMS = "herald:metrics:histograms"
SEPARATOR = "|"
BUCKETS = {  # upper bounds, seconds
    "attempt_duration_seconds": (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    "publish_to_success_seconds": (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400),
}


def field(name: str, *labels: str) -> str:
    return SEPARATOR.join((name, *labels))


_pending = {"counters": Counter(), "buckets": Counter(), "sums": Counter()}
_lock = threading.Lock()  # the tally
_flushing = threading.Lock()  # one flush at a time, whole
_flusher = {"pid": None}
FLUSH_SECONDS = 1.0


def add(counts: Counter | dict, observed: dict[str, list[float]] | None = None) -> None:
    """Add `counts` ({field(name, *labels): n}) and `observed` values ({histogram name: [seconds]}): to this
    process's tally, which a thread of its own adds to Redis every FLUSH_SECONDS in one pipeline (and at exit).
    A pipeline per recorded batch and two per publish cost a worker and the web a round trip each; this costs one
    a second, whatever the traffic. A process killed outright loses its last second's counts; while Redis is away
    the tally waits (its keys are the bounded label sets, so it does not grow with the traffic)."""
    buckets: Counter = Counter()
    sums: Counter = Counter()
    for name, values in (observed or {}).items():
        bounds = BUCKETS[name]
        for value in values:
            at = bisect.bisect_left(bounds, value)
            buckets[field(name, str(bounds[at]) if at < len(bounds) else "+Inf")] += 1
        if values:  # the count is the +Inf bucket's, once summed
            sums[field(name, "sum")] += sum(values)
    counted = {key: n for key, n in counts.items() if n}
    if not counted and not buckets:
        return
    with _lock:
        _pending["counters"].update(counted)
        _pending["buckets"].update(buckets)
        _pending["sums"].update(sums)
    if _flusher["pid"] != os.getpid():  # first count of this process (or of a forked child: threads do not fork)
        _start_flusher()


def _start_flusher() -> None:
    with _lock:
        if _flusher["pid"] == os.getpid():
            return
        _flusher["pid"] = os.getpid()
    threading.Thread(target=_flush_forever, name="herald-counters", daemon=True).start()


def _flush_forever() -> None:
    while True:
        time.sleep(FLUSH_SECONDS)
        flush()


def flush() -> None:
    """Add this process's tally to Redis now; what Redis does not take stays for the next flush. Never raises."""
    with _flushing:
        _flush()


def discard() -> None:
    """Forget this process's tally (tests: what one test counted is not the next one's)."""
    with _flushing, _lock:
        for kind in _pending:
            _pending[kind] = Counter()


def _flush() -> None:
    with _lock:
        taken = {kind: tally for kind, tally in _pending.items() if tally}
        for kind in taken:
            _pending[kind] = Counter()
    if not taken:
        return
    try:
        pipe = redis_link.connection().pipeline(transaction=False)
        for key, n in taken.get("counters", {}).items():
            pipe.hincrby(COUNTERS, key, n)
        for key, n in taken.get("buckets", {}).items():
            pipe.hincrby(HISTOGRAMS, key, n)
        for key, total in taken.get("sums", {}).items():
            pipe.hincrbyfloat(HISTOGRAMS, key, total)
        pipe.execute()
    except Exception as exc:  # never into anyone's work; kept for the next flush
        with _lock:
            for kind, tally in taken.items():
                _pending[kind].update(tally)
        if isinstance(exc, RedisError):
            log.info("operator counters not added yet (Redis: %s); they are kept for the next try", exc)
        else:
            log.exception("operator counters not added yet")


atexit.register(flush)


def add_after_commit(counts: Counter | dict, observed: dict[str, list[float]] | None = None) -> None:
    """`add`, once the caller's transaction commits (at once outside one)."""
    if counts or observed:
        after_commit(add, counts, observed)


def read() -> tuple[dict[tuple, int], dict[str, dict]]:
    """(counters {(name, *labels): n}, histograms {name: {"buckets": [(le, cumulative)], "sum"}}), this process's
    tally added first; raises RedisError when Redis cannot be read (the scrape leaves the series out)."""
    flush()
    connection = redis_link.connection()
    raw_counters = connection.hgetall(COUNTERS)
    raw_histograms = connection.hgetall(HISTOGRAMS)
    counters = {tuple(key.decode().split(SEPARATOR)): int(value) for key, value in raw_counters.items()}
    found = {key.decode(): value for key, value in raw_histograms.items()}
    histograms = {}
    for name, bounds in BUCKETS.items():
        running, buckets = 0, []
        for bound in (*bounds, "+Inf"):
            running += int(found.get(field(name, str(bound)), 0))
            buckets.append((bound, running))
        histograms[name] = {"buckets": buckets, "sum": float(found.get(field(name, "sum"), 0) or 0)}
    return counters, histograms


SLOTS = "herald:metrics:slots"  # process → "in use, slots, unix time" of its last report
SLOTS_REPORT_SECONDS = 5.0
SLOTS_FRESH_SECONDS = 60.0  # a report older than this is a process gone or idle: left out, then removed


def report_slots(process: str, in_use: int, slots: int, at: float) -> None:
    """A worker's send slots now (the pump calls it every SLOTS_REPORT_SECONDS and when it ends)."""
    try:
        redis_link.connection().hset(SLOTS, process, f"{in_use} {slots} {at:.0f}")
    except RedisError as exc:
        log.info("send slots not reported (Redis: %s)", exc)


def read_slots(now: float) -> dict[str, tuple[int, int]]:
    """{process: (in use, slots)} of the processes that reported lately; stale reports are removed."""
    connection = redis_link.connection()
    fresh, stale = {}, []
    for process, value in connection.hgetall(SLOTS).items():
        try:
            in_use, slots, at = value.decode().split()
            float(at), int(in_use), int(slots)
        except ValueError:
            stale.append(process)
            continue
        if now - float(at) > SLOTS_FRESH_SECONDS:
            stale.append(process)
        else:
            fresh[process.decode()] = (int(in_use), int(slots))
    if stale:
        connection.hdel(SLOTS, *stale)
    return fresh

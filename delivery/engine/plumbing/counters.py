"""Operator counters and histograms that only grow, shared by every process on every host through Redis.

Prometheus needs counters that never decrease (`rate()`), and histograms. Herald's processes are many (web, any
number of workers, the scheduler) on any number of hosts, so an in-process counter would each hold a slice, and
PostgreSQL's rows cannot count what retention already deleted. So each process adds what it did to a Redis hash
(after its commit: a change that rolled back is not counted), Herald's own long-running processes as a tally once
a second (`buffer`), and the scrape reads the hash (delivery/web/prometheus.py). A lost Redis resets them, which
Prometheus reads as a counter reset, as it does a restart. Adding never fails the caller: a Redis error is logged
and those counts are lost.

Labels are bounded: outcome, error class, queue, status. Never a tenant or an owner (the scrape's per-owner gauges
come from PostgreSQL; per-tenant figures answer through the API). Histograms keep non-cumulative bucket counts;
the scrape sums them into Prometheus's cumulative form.
"""

import atexit
import bisect
import logging
import os
import threading
from collections import Counter

from redis.exceptions import RedisError

from delivery.engine.plumbing import redis_link
from delivery.engine.plumbing.database import after_commit

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
_state = {"buffering": False, "flusher": None, "failing": False}
_wake = threading.Event()
FLUSH_SECONDS = 1.0
WAIT_FOR_A_FLUSH_SECONDS = 2.0  # a scrape or the exit waits no longer for the flusher's write


def buffer() -> None:
    """Tally this process's counts and add them to Redis once every FLUSH_SECONDS (and at exit), in one pipeline,
    instead of one pipeline per recorded batch and two per publish. Herald's own long-running processes ask for it
    (the worker, the scheduler, gunicorn's workers); elsewhere (a host project's web, a job runner that ends its
    processes with os._exit) every count goes to Redis as it is made. A process killed outright loses its last
    second's counts."""
    with _lock:
        _state["buffering"] = True
        if _state["flusher"] is None:
            thread = threading.Thread(target=_flush_forever, name="herald-counters", daemon=True)
            thread.start()
            _state["flusher"] = thread


def unbuffer() -> None:
    """Every count to Redis as it is made again (tests), the tally added first."""
    _state["buffering"] = False
    flush()


def add(counts: Counter | dict, observed: dict[str, list[float]] | None = None) -> None:
    """Add `counts` ({field(name, *labels): n}) and `observed` values ({histogram name: [seconds]}): now, or to
    this process's tally when it buffers (`buffer`)."""
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
    if not _state["buffering"]:
        _write({"counters": counted, "buckets": buckets, "sums": sums})
        return
    with _lock:
        _pending["counters"].update(counted)
        _pending["buckets"].update(buckets)
        _pending["sums"].update(sums)


def _flush_forever() -> None:
    while not _wake.wait(FLUSH_SECONDS):  # an Event's own wait: nobody's patched time.sleep reaches this loop
        flush()


def flush(timeout: float | None = None) -> None:
    """Add this process's tally to Redis now (waiting at most `timeout` seconds for a flush under way, else
    skipping). Never raises."""
    if not _flushing.acquire(timeout=-1 if timeout is None else timeout):
        return
    try:
        with _lock:
            taken = {kind: tally for kind, tally in _pending.items() if tally}
            for kind in taken:
                _pending[kind] = Counter()
        if taken:
            _write(taken)
    finally:
        _flushing.release()


def discard() -> None:
    """Forget this process's tally (tests: what one test counted is not the next one's)."""
    with _flushing, _lock:
        for kind in _pending:
            _pending[kind] = Counter()


def _write(taken: dict) -> None:
    """One pipeline. A failure loses these counts: the commands may have been applied (a pipeline without a
    transaction applies the commands around a failing one; a connection lost after sending says nothing), and
    adding them again could count them twice, where a counter that misses a second's counts only under-counts.
    Said once per outage; never raises."""
    try:
        pipe = redis_link.connection().pipeline(transaction=False)
        for key, n in taken.get("counters", {}).items():
            pipe.hincrby(COUNTERS, key, n)
        for key, n in taken.get("buckets", {}).items():
            pipe.hincrby(HISTOGRAMS, key, n)
        for key, total in taken.get("sums", {}).items():
            pipe.hincrbyfloat(HISTOGRAMS, key, total)
        pipe.execute()
        if _state["failing"]:
            _state["failing"] = False
            log.info("operator counters are added to Redis again")
    except Exception as exc:  # never into anyone's work
        if not _state["failing"]:
            _state["failing"] = True
            if isinstance(exc, RedisError):
                log.info("operator counters not updated (Redis: %s); the figures miss what is counted meanwhile",
                         exc)
            else:
                log.exception("operator counters not updated")


def _after_fork_in_child() -> None:
    """A forked child starts with fresh locks (one may have been held by a thread that did not fork), an empty
    tally (the parent still holds and adds its own) and no flusher: it buffers only if it asks again."""
    global _lock, _flushing
    _lock, _flushing = threading.Lock(), threading.Lock()
    for kind in _pending:
        _pending[kind] = Counter()
    _state.update(buffering=False, flusher=None)


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(flush, WAIT_FOR_A_FLUSH_SECONDS)


def add_after_commit(counts: Counter | dict, observed: dict[str, list[float]] | None = None) -> None:
    """`add`, once the caller's transaction commits (at once outside one)."""
    if counts or observed:
        after_commit(add, counts, observed)


def read() -> tuple[dict[tuple, int], dict[str, dict]]:
    """(counters {(name, *labels): n}, histograms {name: {"buckets": [(le, cumulative)], "sum"}}), this process's
    tally added first; raises RedisError when Redis cannot be read (the scrape leaves the series out)."""
    flush(WAIT_FOR_A_FLUSH_SECONDS)
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

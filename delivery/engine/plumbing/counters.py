"""Operator counters and histograms that only grow, shared by every process on every host through Redis.

Prometheus needs counters that never decrease (`rate()`), and histograms. Herald's processes are many (web, any
number of workers, the scheduler) on any number of hosts, so an in-process counter would each hold a slice, and
PostgreSQL's rows cannot count what retention already deleted. So each process adds what it did to a Redis hash,
a pipeline or two per recorded batch or publish (after its commit: a change that rolled back is not counted), and
the scrape reads the hash (delivery/web/prometheus.py). A lost Redis resets them, which Prometheus reads as a counter
reset, as it does a restart. Adding never fails the caller: a Redis error is logged and the figures go uncounted.

Labels are bounded: outcome, error class, queue, status. Never a tenant or an owner (the scrape's per-owner gauges
come from PostgreSQL; per-tenant figures answer through the API). Histograms keep non-cumulative bucket counts;
the scrape sums them into Prometheus's cumulative form.
"""

import bisect
import logging
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


def add(counts: Counter | dict, observed: dict[str, list[float]] | None = None) -> None:
    """Add `counts` ({field(name, *labels): n}) and `observed` values ({histogram name: [seconds]}) now."""
    pipe_fields: dict[str, int] = {key: n for key, n in counts.items() if n}
    buckets: Counter = Counter()
    sums: dict[str, float] = {}
    for name, values in (observed or {}).items():
        bounds = BUCKETS[name]
        for value in values:
            at = bisect.bisect_left(bounds, value)
            buckets[field(name, str(bounds[at]) if at < len(bounds) else "+Inf")] += 1
        if values:  # the count is the +Inf bucket's, once summed
            sums[field(name, "sum")] = sum(values)
    if not pipe_fields and not buckets:
        return
    try:
        pipe = redis_link.connection().pipeline(transaction=False)
        for key, n in pipe_fields.items():
            pipe.hincrby(COUNTERS, key, n)
        for key, n in buckets.items():
            pipe.hincrby(HISTOGRAMS, key, n)
        for key, total in sums.items():
            pipe.hincrbyfloat(HISTOGRAMS, key, total)
        pipe.execute()
    except RedisError as exc:
        log.info("operator counters not updated (Redis: %s); the figures miss this batch", exc)
    except Exception:  # never into the caller's recording or publish
        log.exception("operator counters not updated")


def add_after_commit(counts: Counter | dict, observed: dict[str, list[float]] | None = None) -> None:
    """`add`, once the caller's transaction commits (at once outside one)."""
    if counts or observed:
        after_commit(add, counts, observed)


def read() -> tuple[dict[tuple, int], dict[str, dict]]:
    """(counters {(name, *labels): n}, histograms {name: {"buckets": [(le, cumulative)], "sum"}}); raises
    RedisError when Redis cannot be read (the scrape leaves the series out)."""
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

"""Endpoint health on the attempt path and by hand: counters, the rolling rate window, transitions, probes.

Counters change only through SQL increments and upserts, so workers failing at the same moment never lose an
update. State changes are conditional updates (`WHERE state = <from>`), so two workers that see the same threshold
crossed record one transition, not two.
"""

import logging
from contextlib import nullcontext
from datetime import timedelta
from functools import cache
from urllib.parse import urlsplit

from django.db import DatabaseError, connection, transaction
from django.db.models import Sum

from delivery.conf import herald
from delivery.engine.plumbing import clock, database
from delivery.engine.plumbing.database import after_commit
from delivery.engine.state import announce, lifecycle
from delivery.rules import circuit
from subscriptions.models import Endpoint, EndpointTransition, EndpointWindowBucket, Subscription

log = logging.getLogger(__name__)
state_log = logging.getLogger("herald.endpoint")  # one line per endpoint state change (docs/operators.md)

WINDOW_BUCKETS = 24  # the rate window rolls in 1/24 steps (an hour for the default 24 h window)


def thresholds() -> circuit.Thresholds:
    return circuit.Thresholds(
        disable_failure_rate=herald.DISABLE_FAILURE_RATE,
        disable_min_attempts=herald.DISABLE_MIN_ATTEMPTS,
        disable_consecutive_failures=herald.DISABLE_CONSECUTIVE_FAILURES,
        freeze_consecutive_failures=herald.FREEZE_CONSECUTIVE_FAILURES,
        freeze_silence_seconds=herald.FREEZE_SILENCE_SECONDS,
        freeze_absolute_failures=herald.FREEZE_ABSOLUTE_FAILURES,
    )


def bucket_seconds() -> int:
    return max(1, herald.RATE_WINDOW_SECONDS // WINDOW_BUCKETS)


def _add_to_window(endpoint_id: int, attempts: int, failures: int, now) -> None:
    size = bucket_seconds()
    bucket = int(now.timestamp()) // size * size
    table = EndpointWindowBucket._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {table} (endpoint_id, bucket, attempts, failures) VALUES (%s, %s, %s, %s)
                ON CONFLICT (endpoint_id, bucket) DO UPDATE
                SET attempts = {table}.attempts + excluded.attempts, failures = {table}.failures + excluded.failures""",
            [endpoint_id, bucket, attempts, failures],
        )


def _count(endpoint_id: int, attempts: int, failures: int, trailing: int | None, now) -> int:
    """The endpoint's counters moved by a group of results, as increments; `trailing`: the failures after its last
    success (None: it had none). Written as SQL (one of four shapes): the ORM built this UPDATE anew for every
    group a worker recorded. Returns the rows counted: 0 for an endpoint deleted meanwhile."""
    field = Endpoint._meta.get_field
    sets = ["{window_attempts} = {window_attempts} + %s", "{window_failures} = {window_failures} + %s"]
    params: list = [attempts, failures]
    at = field("last_success_at").get_db_prep_value(now, connection)
    if trailing is not None:
        sets += ["{consecutive_failures} = %s", "{last_success_at} = %s"]
        params += [trailing, at]
    else:
        sets.append("{consecutive_failures} = {consecutive_failures} + %s")
        params.append(failures)
    if failures:
        sets.append("{last_failure_at} = %s")
        params.append(at)
    columns = {name: connection.ops.quote_name(field(name).column) for name in (
        "window_attempts", "window_failures", "consecutive_failures", "last_success_at", "last_failure_at")}
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Endpoint._meta.db_table} SET {', '.join(sets).format(**columns)} "
                       f"WHERE {connection.ops.quote_name(Endpoint._meta.pk.column)} = %s", [*params, endpoint_id])
        return cursor.rowcount


def window_totals(endpoint_id: int, now) -> tuple[int, int]:
    start = int(now.timestamp()) - herald.RATE_WINDOW_SECONDS
    totals = EndpointWindowBucket.objects.filter(endpoint_id=endpoint_id, bucket__gt=start).aggregate(
        attempts=Sum("attempts"), failures=Sum("failures"))
    return totals["attempts"] or 0, totals["failures"] or 0


def _summary(outcomes: list[bool]) -> tuple[int, int, int | None]:
    """(attempts, failures, the failures after the last success or None if none succeeded) of results in order."""
    failures = outcomes.count(False)
    trailing = len(outcomes) - 1 - max(i for i, ok in enumerate(outcomes) if ok) if True in outcomes else None
    return len(outcomes), failures, trailing


def _count_one(endpoint_id: int, outcomes: list[bool], now) -> None:
    with transaction.atomic():
        attempts, failures, trailing = _summary(outcomes)
        if _count(endpoint_id, attempts, failures, trailing, now):  # the row's lock, held to the commit
            _add_to_window(endpoint_id, attempts, failures, now)  # (a deleted endpoint has no window to add to)


@cache
def _counting_statement() -> str:
    """Several endpoints' counters and rate-window buckets in one statement (PostgreSQL); returns the endpoints it
    counted. It takes only the endpoints' rows nobody holds (`locked`, SKIP LOCKED): it never waits, so it never
    holds some endpoints' rows while it waits for another's (a transition releasing an endpoint's held deliveries
    can hold its row for long), and never deadlocks with another worker counting the same endpoints. A bucket is
    written only for an endpoint counted (one deleted meanwhile is skipped: its bucket would break the foreign
    key). Written once per process: it is asked for every group a worker records."""
    quote, field = connection.ops.quote_name, Endpoint._meta.get_field
    names = {name: quote(field(name).column) for name in (
        "window_attempts", "window_failures", "consecutive_failures", "last_success_at", "last_failure_at")}
    array = database.array_parameter()
    return """
        WITH v (id, attempts, failures, after_success) AS (
            SELECT * FROM unnest({array}::bigint[], {array}::integer[], {array}::integer[], {array}::integer[])
        ), locked AS (
            SELECT {key} AS id FROM {table} WHERE {key} IN (SELECT id FROM v) FOR NO KEY UPDATE SKIP LOCKED
        ), counted AS (
            UPDATE {table} AS e SET
                {window_attempts} = e.{window_attempts} + v.attempts,
                {window_failures} = e.{window_failures} + v.failures,
                {consecutive_failures} = COALESCE(v.after_success, e.{consecutive_failures} + v.failures),
                {last_success_at} = CASE WHEN v.after_success IS NULL THEN e.{last_success_at} ELSE %s::timestamptz END,
                {last_failure_at} = CASE WHEN v.failures > 0 THEN %s::timestamptz ELSE e.{last_failure_at} END
            FROM v JOIN locked USING (id) WHERE e.{key} = v.id
            RETURNING e.{key} AS id
        )
        INSERT INTO {buckets} ({endpoint}, bucket, attempts, failures)
        SELECT v.id, %s, v.attempts, v.failures FROM v JOIN counted USING (id) ORDER BY v.id
        ON CONFLICT ({endpoint}, bucket) DO UPDATE
        SET attempts = {buckets}.attempts + excluded.attempts, failures = {buckets}.failures + excluded.failures
        RETURNING {endpoint}
    """.format(array=array, table=quote(Endpoint._meta.db_table), key=quote(Endpoint._meta.pk.column),
               buckets=quote(EndpointWindowBucket._meta.db_table),
               endpoint=quote(EndpointWindowBucket._meta.get_field("endpoint").column), **names)


def count_results(outcomes: dict[int, list[bool]], now) -> None:
    """Apply each endpoint's results (True = success, in order) to its counters and its rate window: one statement
    for all whose rows are free on PostgreSQL (a worker records a group of answers from many endpoints at once; one
    transaction per endpoint was most of recording them to slow receivers), then the others an endpoint at a time,
    each waiting for its row as every writer of an endpoint's counters does (this, `evaluate`, transitions), so
    concurrent workers' counts add up exactly. If the one statement fails, each endpoint is counted on its own, so
    that a failure with one endpoint's counters never touches another's."""
    outcomes = {endpoint_id: results for endpoint_id, results in sorted(outcomes.items()) if results}
    if not outcomes:
        return
    if database.on_psycopg3(connection):
        summaries = [_summary(results) for results in outcomes.values()]
        size = bucket_seconds()
        try:  # one statement: atomic on its own; a savepoint only inside a caller's transaction
            with transaction.atomic() if connection.in_atomic_block else nullcontext(), \
                    database.bound_cursor() as cursor:
                cursor.execute(_counting_statement(), [
                    list(outcomes), *(list(column) for column in zip(*summaries, strict=True)),
                    now, now, int(now.timestamp()) // size * size])
                counted = {endpoint_id for (endpoint_id,) in cursor.fetchall()}
            outcomes = {key: results for key, results in outcomes.items() if key not in counted}
        except DatabaseError:
            log.warning("the health counters of %d endpoints could not be updated together; one by one",
                        len(outcomes), exc_info=True)
    for endpoint_id, results in outcomes.items():
        try:
            _count_one(endpoint_id, results, now)
        except DatabaseError:
            log.exception("endpoint %s: its health counters could not be updated", endpoint_id)


def record_results(endpoint_id: int, outcomes: list[bool], now, *, gone: bool = False, probe: bool = False) -> None:
    """Apply a batch of attempt outcomes (True = success), in order, to one endpoint; transition if called for.

    Every writer of an endpoint's counters takes the endpoint's row first (this, `evaluate`, transitions), so
    concurrent workers' counts add up exactly: the window's totals are read under that lock, after every bucket
    written before it, and never written back over a count that came in meanwhile."""
    if not outcomes:
        return
    _count_one(endpoint_id, outcomes, now)
    if outcomes.count(False) or gone or probe:
        evaluate(endpoint_id, now, gone=gone, probe_succeeded=probe and outcomes[-1])


def evaluate(endpoint_id: int, now, *, gone: bool = False, probe_succeeded: bool = False) -> None:
    with transaction.atomic():
        # FOR NO KEY UPDATE: serialised with the counters' writers, not with transactions inserting deliveries
        # (their foreign key holds KEY SHARE on the row: a publish in a shop's open transaction, say).
        endpoint = Endpoint.objects.select_for_update(no_key=True).filter(id=endpoint_id).first()
        if endpoint is None:
            return
        attempts, failures = window_totals(endpoint_id, now)  # under the lock: every count before it, none after
        Endpoint.objects.filter(id=endpoint_id).update(window_attempts=attempts, window_failures=failures)
        state = circuit.Health(endpoint.state, endpoint.consecutive_failures, attempts, failures,
                               endpoint.last_success_at)
    transition = circuit.next_state(state, thresholds(), now, gone=gone, probe_succeeded=probe_succeeded)
    if transition:
        transition_endpoint(endpoint, transition.to_state, transition.reason, now=now)


def transition_endpoint(endpoint: Endpoint, to_state: str, reason: str, *, now=None, actor=None,
                        reset: bool = False) -> bool:
    """Move an endpoint to `to_state` if it is still in the state we read; record the transition. True if moved."""
    now = now or clock.now()
    from_state = endpoint.state
    changes = {"state": to_state, "state_changed_at": now, "state_reason": reason[:255],
               "next_probe_at": now + timedelta(seconds=herald.PROBE_INTERVAL_SECONDS)
               if to_state == circuit.DISABLED else None}
    if reset:
        changes.update(consecutive_failures=0, window_attempts=0, window_failures=0)
    with transaction.atomic():
        moved = Endpoint.objects.filter(id=endpoint.id, state=from_state).update(**changes)
        if not moved:
            return False
        if reset:
            EndpointWindowBucket.objects.filter(endpoint_id=endpoint.id).delete()
        endpoint.refresh_from_db()
        EndpointTransition.objects.create(
            endpoint=endpoint, at=now, from_state=from_state, to_state=to_state, reason=reason[:255], actor=actor,
            consecutive_failures=endpoint.consecutive_failures, window_attempts=endpoint.window_attempts,
            window_failures=endpoint.window_failures,
        )
        if to_state == circuit.ACTIVE:
            release_held(endpoint.id, now)
        announce.endpoint_changed(endpoint, from_state, to_state, reason)
        after_commit(log_state_change, endpoint, from_state, to_state, reason, actor)
    return True


def log_state_change(endpoint: Endpoint, from_state: str, to_state: str, reason: str, actor) -> None:
    """One line per committed state change: whose endpoint (owner, tenant), its host, the states, why and who."""
    if not state_log.isEnabledFor(logging.INFO):
        return
    fields = {"owner": endpoint.owner_id, "tenant": announce.tenant_name(endpoint.tenant_id), "endpoint": endpoint.id,
              "endpoint_host": urlsplit(endpoint.url).hostname, "from": from_state, "to": to_state,
              "reason": reason[:255], "actor": str(actor) if actor else None}
    state_log.info("endpoint %s", " ".join(f"{key}={value}" for key, value in fields.items() if value is not None),
                   extra={"herald": fields})


CONFIRMED = {"subscription__status": Subscription.Status.CONFIRMED}  # held rows that wait only for their endpoint


def release_held(endpoint_id: int, now) -> int:
    """Deliveries held for an unhealthy endpoint become due at once (the throttle still applies)."""
    return lifecycle.release(now=now, endpoint_id=endpoint_id, **CONFIRMED)


def release_stranded(now=None) -> int:
    """Held deliveries whose endpoint is active and subscription confirmed have nothing left to wait for. They
    arise when a worker holds a row because it read its endpoint as disabled while a probe elsewhere was bringing
    the endpoint back (the release found the row in flight). The reconciler makes them due again."""
    return lifecycle.release(now=now or clock.now(), endpoint__state=circuit.ACTIVE, **CONFIRMED)


def take_probe_slot(endpoint_id: int, now) -> bool:
    """At most one probe per disabled endpoint per interval, across all workers."""
    interval = timedelta(seconds=herald.PROBE_INTERVAL_SECONDS)
    return bool(Endpoint.objects.filter(id=endpoint_id, state=circuit.DISABLED, next_probe_at__lte=now)
                .update(next_probe_at=now + interval))


def schedule_probes(now=None) -> int:
    """For each disabled endpoint whose probe is due, make one held delivery due so that a worker probes with it."""
    now = now or clock.now()
    scheduled = 0
    for endpoint_id in Endpoint.objects.filter(state=circuit.DISABLED, next_probe_at__lte=now).values_list(
            "id", flat=True)[:1000]:
        scheduled += lifecycle.release(now=now, limit=1, endpoint_id=endpoint_id, **CONFIRMED)
    return scheduled


def endpoint_enable(*, endpoint: Endpoint, actor=None) -> Endpoint:
    """By hand: active again, counters reset, held deliveries released. Works from disabled and frozen."""
    if endpoint.state != circuit.ACTIVE:
        transition_endpoint(endpoint, circuit.ACTIVE, "enabled by hand", actor=actor, reset=True)
    endpoint.refresh_from_db()
    return endpoint


def endpoint_disable(*, endpoint: Endpoint, actor=None) -> Endpoint:
    if endpoint.state == circuit.ACTIVE:
        transition_endpoint(endpoint, circuit.DISABLED, "disabled by hand", actor=actor)
    endpoint.refresh_from_db()
    return endpoint


def endpoint_freeze(*, endpoint: Endpoint, actor=None) -> Endpoint:
    if endpoint.state != circuit.FROZEN:
        transition_endpoint(endpoint, circuit.FROZEN, "frozen by hand", actor=actor)
    endpoint.refresh_from_db()
    return endpoint

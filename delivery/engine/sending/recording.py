"""Recording a batch of tries: the attempt rows, the deliveries' new state, and the endpoints' health.

A batch is an optimisation, never a failure domain. It is written in one short transaction; if that fails, row by
row; and a row that still cannot be stored is recorded with an attempt stripped of what the receiver sent, under
the error class `unrecordable`, so its try still counts and its schedule still moves on. Only rows whose lease is
still this job's are written, and an attempt row is created only for those: recording twice is harmless.
"""

import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

from django.db import DatabaseError, connection, transaction

from delivery.engine.claiming import leases
from delivery.engine.plumbing import clock, database, shortcuts
from delivery.engine.sending import spans
from delivery.engine.state import health, lifecycle, transitions
from delivery.models import Attempt, Delivery, Exchange
from delivery.rules import decisions
from delivery.rules.policy import DeliveryPolicy
from delivery.rules.storable import clean_text
from delivery.rules.vocabulary import ErrorClass
from delivery.rules.wire import OutgoingRequest
from delivery.transport.posting import EXCERPT_BYTES, SendResult

log = logging.getLogger(__name__)
_rng = random.SystemRandom()


@dataclass(frozen=True)
class Tried:
    """One try of one delivery: what was sent (None if Herald failed before sending) and what came back."""

    delivery: Delivery
    policy: DeliveryPolicy
    number: int
    request: OutgoingRequest | None
    result: SendResult
    queue: str
    span: object = None  # its `herald attempt` span, when tracing is on (spans.py)


def internal_failure(delivery: Delivery, policy, exc: Exception, queue_name: str) -> Tried:
    """A try that failed inside Herald before anything was sent. It counts, so the policy's limits end it."""
    result = SendResult(status=None, duration_ms=0, started_at=time.time(), error_class=Attempt.ErrorClass.INTERNAL,
                        error_detail=clean_text(f"{type(exc).__name__}: {exc}", 1024))
    return Tried(delivery, policy, delivery.attempt_count + 1, None, result, queue_name)


def header(headers: dict, name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in headers.items() if key.lower() == wanted), None)


def policy_decision(tried: Tried) -> decisions.Decision:
    """What the subscription's policy makes of a try's answer."""
    result, delivery = tried.result, tried.delivery
    finished = finished_at(result)
    answer = decisions.Answer(status=result.status, error_class=result.error_class,
                                retry_after=decisions.parse_retry_after(header(result.headers, "Retry-After"),
                                                                        finished))
    return retry_decision(delivery, tried.policy, tried.number, answer, finished)


def retry_decision(delivery: Delivery, policy, number: int, answer: decisions.Answer, now) -> decisions.Decision:
    """The policy's decision on try `number` of `delivery`, however the try ended (answered, or lost with its
    worker: the reconciler asks here too): the budget counts from the delivery's last fresh one (a redrive or a
    replay starts another), and one random generator jitters every retry."""
    return decisions.decide(policy, attempt_number=number - delivery.budget_attempts,
                            published_at=delivery.budget_start, now=now, rng=_rng, answer=answer)


def finished_at(result: SendResult) -> datetime:
    return datetime.fromtimestamp(result.started_at, tz=UTC) + timedelta(milliseconds=result.duration_ms)


def never_sent(tried: Tried) -> bool:
    """A try that ended before its request: its transformation cancelled or failed, or could not run."""
    request = tried.request
    return (tried.result.error_class in decisions.TRANSFORMED_AWAY
            or (request is not None and request.rendering is not None and tried.result.sent is None))


def attempt_row(tried: Tried, outcome: str) -> Attempt:
    """The attempt as stored: what was sent (a transformation's request when it made one; nothing when it ended
    the try) and what came back."""
    result = tried.result
    request = None if never_sent(tried) else result.sent or tried.request
    return Attempt(
        delivery_id=tried.delivery.id, number=tried.number, queue=tried.queue,
        started_at=datetime.fromtimestamp(result.started_at, tz=UTC), duration_ms=result.duration_ms,
        request_url=request.url if request else tried.delivery.endpoint.url,
        request_headers=request.recorded_headers if request else {},
        request_body=clean_text(request.body[:EXCERPT_BYTES].decode("utf-8", "replace")) if request else "",
        response_status=result.status, response_headers=result.headers, response_body=result.body_excerpt,
        error_class=result.error_class, error_detail=result.error_detail, outcome=outcome,
    )


def stripped(attempt: Attempt, exc: Exception) -> Attempt:
    """The same attempt without anything the receiver sent: what is left is ours and always storable."""
    return Attempt(
        delivery_id=attempt.delivery_id, number=attempt.number, queue=attempt.queue, started_at=attempt.started_at,
        duration_ms=attempt.duration_ms, request_url=attempt.request_url, response_status=attempt.response_status,
        error_class=Attempt.ErrorClass.UNRECORDABLE, outcome=attempt.outcome,
        error_detail=f"the answer could not be stored ({type(exc).__name__}); it was left out",
    )


def outcomes(tries: list[Tried]) -> tuple[dict[int, dict], dict[int, Attempt], set[int]]:
    """For each try, the policy's decision as the delivery's changes and its attempt row; and the deliveries whose
    answer (410 Gone) freezes their endpoint."""
    changes: dict[int, dict] = {}
    attempts: dict[int, Attempt] = {}
    gone: set[int] = set()
    for tried in tries:
        try:
            decision, change, attempt = outcome(tried)
        except Exception as exc:  # one row's answer fails that row alone: recorded as Herald's failure to read it
            log.exception("delivery %s: its answer could not be decided on; recorded as an internal failure",
                          tried.delivery.id)
            try:
                decision, change, attempt = outcome(unreadable(tried, exc))
            except Exception:  # not even that: left unwritten; its lease runs out and the reconciler counts it
                log.exception("delivery %s: left to the reconciler", tried.delivery.id)
                continue
        changes[tried.delivery.id], attempts[tried.delivery.id] = change, attempt
        if decision.freeze_endpoint:
            gone.add(tried.delivery.id)
    return changes, attempts, gone


def outcome(tried: Tried) -> tuple[decisions.Decision, dict, Attempt]:
    decision = policy_decision(tried)
    change = transitions.attempted(tried.delivery, decision, now=finished_at(tried.result))
    return decision, change, attempt_row(tried, decision.attempt_outcome)


def unreadable(tried: Tried, exc: Exception) -> Tried:
    """The same try as Herald's own failure, without what the receiver sent (which could not be read)."""
    result = tried.result
    started = result.started_at if isinstance(result.started_at, int | float) else time.time()
    duration = result.duration_ms if isinstance(result.duration_ms, int) else 0
    failed = SendResult(status=None, duration_ms=duration, started_at=started, error_class=Attempt.ErrorClass.INTERNAL,
                        error_detail=clean_text(f"the answer could not be read ({type(exc).__name__}: {exc})", 1024))
    return Tried(tried.delivery, tried.policy, tried.number, tried.request, failed, tried.queue, tried.span)


def shared(tries: list[Tried], attempts: dict[int, Attempt]) -> list[Exchange]:
    """The tries that went in one request (a batch) share one record of what it carried and got back: the
    exchanges to store with them (unsaved); their attempts point at them and keep no copy of their own."""
    by_request = defaultdict(list)
    for tried in tries:
        if tried.request is not None:
            by_request[id(tried.request)].append(attempts[tried.delivery.id])
    exchanges = []
    for members in by_request.values():
        if len(members) < 2:
            continue
        first = members[0]
        exchange = Exchange(request_headers=first.request_headers, request_body=first.request_body,
                            response_headers=first.response_headers, response_body=first.response_body)
        exchanges.append(exchange)
        for attempt in members:
            attempt.exchange = exchange
            attempt.request_headers, attempt.request_body = {}, ""
            attempt.response_headers, attempt.response_body = {}, ""
    return exchanges


def record(claimed: list[Delivery], tries: list[Tried], untried: dict[int, dict], probes: set[int],
           now=None) -> None:
    """Write every try and the changes of the rows that were not tried (`untried`: held, deferred, expired);
    `now` is when the endpoints' health counts them."""
    if not tries and not untried:
        return
    changes, attempts, gone = outcomes(tries)
    exchanges = shared(tries, attempts)
    updates = {**untried, **changes}
    try:
        with transaction.atomic():
            written = write_back_and_settle(claimed, updates)
            Exchange.objects.bulk_create(exchanges)
            store_attempts([attempt for key, attempt in attempts.items() if key in written])
    except DatabaseError as exc:
        # the error's first line only: a COPY's context quotes the row's values, which may be a receiver's answer
        log.warning("recording %d deliveries together failed (%s: %s); recording them one by one", len(updates),
                    type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
        for exchange in exchanges:  # their ids were the rolled-back transaction's: each is stored anew
            exchange.pk, exchange._state.adding = None, True
        written = record_one_by_one(claimed, updates, attempts)
    recorded = [tried for tried in tries if tried.delivery.id in written]
    try:
        spans.log_attempts(recorded, changes, spans.ended(tries, attempts, written))
    except Exception:  # a trace or a log line never fails the recording it tells of
        log.exception("the log lines or spans of %d attempts failed", len(recorded))
    spans.count_attempts(recorded, attempts, changes, now)
    record_health(recorded, gone, probes, now or clock.now())


# Every column an attempt's INSERT would write. COPY writes what it is given: no column may need Django to make its
# value (a db_default, a generated column, auto_now), which tests/delivery/engine/sending/test_recording.py checks.
COPIED = [field for field in Attempt._meta.concrete_fields if not field.primary_key]
# Up to this many rows go in one prepared INSERT of arrays instead of a COPY: a COPY costs PostgreSQL about 0.75 ms
# whatever it carries (its start and end), three times the INSERT of one or two rows that a steady stream records
# per group (docs/benchmarks.md, "The steady rate, a third cheaper"). A drain's groups of dozens stay with the
# COPY.
INSERTED_UP_TO = 8


def store_attempts(rows: list[Attempt]) -> None:
    """Insert attempt rows: on PostgreSQL with psycopg 3, a few in one prepared INSERT of one array per column, more
    with one COPY, whose rows psycopg writes in C (a bulk INSERT had each value quoted into the statement in
    Python, a tenth of a worker's time on a fast drain); else `bulk_create`. Inside the caller's transaction; a
    failure is Django's DatabaseError, as an INSERT's would be. (Unlike an INSERT, a COPY does not pass Django's
    execute wrappers: query counters and DB instrumentation built on them do not see it.)"""
    if not rows:
        return
    if not database.on_psycopg3(connection):
        Attempt.objects.bulk_create(rows)
        return
    preparers = [(shortcuts.preparer(field, connection), field.attname) for field in COPIED]
    for attempt in rows:
        attempt._prepare_related_fields_for_save(operation_name="store_attempts")  # its exchange's new id
    values = [[prepare(getattr(attempt, attname)) for prepare, attname in preparers] for attempt in rows]
    if len(rows) <= INSERTED_UP_TO:
        with database.bound_cursor() as cursor:
            cursor.execute(_insert_statement(), [list(column) for column in zip(*values, strict=True)])
        return
    columns = ", ".join(connection.ops.quote_name(field.column) for field in COPIED)
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.copy(f"COPY {Attempt._meta.db_table} ({columns}) FROM STDIN") as copy:
            for row in values:
                copy.write_row(row)


@cache
def _insert_statement() -> str:
    columns = ", ".join(connection.ops.quote_name(field.column) for field in COPIED)
    array = database.array_parameter()
    arrays = ", ".join(f"{array}::{field.db_type(connection)}[]" for field in COPIED)
    return f"INSERT INTO {Attempt._meta.db_table} ({columns}) SELECT * FROM unnest({arrays})"


def write_back_and_settle(claimed: list[Delivery], updates: dict[int, dict]) -> set[int]:
    """Inside the caller's transaction: the changes written under the lease, then what follows them (the next of
    an ordering key, signals and a pump or the scheduler after commit). Returns the ids written."""
    written = leases.write_back(claimed, updates)
    lifecycle.settled({i: updates[i] for i in written},
                      keyed=[d.id for d in claimed if d.ordering_key and d.id in written])
    return written


def record_one_by_one(claimed: list[Delivery], updates: dict, attempts: dict[int, Attempt]) -> set[int]:
    by_id = {delivery.id: delivery for delivery in claimed}
    written = set()
    for delivery_id, changes in updates.items():
        attempt = attempts.get(delivery_id)
        try:
            written |= write_one(by_id[delivery_id], changes, attempt)
        except DatabaseError as exc:
            if attempt is None:
                raise  # nothing of the receiver's in it: the database itself is failing
            log.warning("delivery %s: its attempt could not be stored (%s); recorded without the answer",
                        delivery_id, exc)
            written |= write_one(by_id[delivery_id], changes, stripped(attempt, exc))
    return written


def write_one(delivery: Delivery, changes: dict, attempt: Attempt | None) -> set[int]:
    with transaction.atomic():
        written = write_back_and_settle([delivery], {delivery.id: changes})
        if written and attempt is not None:
            if attempt.exchange is not None and attempt.exchange.pk is None:
                attempt.exchange.save()  # the first of its batch to be written one by one stores it
            attempt.exchange = attempt.exchange  # its id as stored now, not a rolled-back batch's
            attempt.save()
    return written


def record_health(tries: list[Tried], gone: set[int], probes: set[int], now) -> None:
    """Endpoint counters: every endpoint's together (health.count_results; one by one if that fails, so that a
    failure with one endpoint's record never touches another's), then a look at each endpoint that failed, went
    or was probed. A request counts once, so one failed batch is one failure, not one per event."""
    by_endpoint = defaultdict(lambda: {"outcomes": [], "gone": False, "probe": False})
    counted = set()  # a batch's request is one result for its endpoint, however many deliveries it carried
    for tried in tries:
        if tried.result.error_class == ErrorClass.CUT_SHORT or never_sent(tried):
            continue  # Herald ended it, or it ended before its request: not the endpoint's doing, nor its health's
        seen = by_endpoint[tried.delivery.endpoint_id]
        if tried.request is None or id(tried.request) not in counted:
            seen["outcomes"].append(tried.result.ok)
            if tried.request is not None:
                counted.add(id(tried.request))
        seen["gone"] |= tried.delivery.id in gone
        seen["probe"] |= tried.delivery.id in probes
    health.count_results({endpoint_id: seen["outcomes"] for endpoint_id, seen in by_endpoint.items()}, now)
    for endpoint_id, seen in by_endpoint.items():
        if False in seen["outcomes"] or seen["gone"] or seen["probe"]:
            try:
                health.evaluate(endpoint_id, now, gone=seen["gone"],
                                probe_succeeded=seen["probe"] and seen["outcomes"][-1])
            except DatabaseError:
                log.exception("endpoint %s: its health could not be evaluated", endpoint_id)

"""Sends that were answered but may not be recorded yet, kept in Redis until the database has them.

Each answer is written here the moment it arrives (a writer thread batches them into one pipeline), independently
of recording it in PostgreSQL. If it dies before
recording (kill -9, a crash while the database is away), the reconciler finds the answer here when the row's lease
runs out and records it as the attempt it was, instead of counting a `lease_expired` try and sending the message
again. An entry names the lease it was sent under, so it is only ever applied to the try it belongs to; entries
expire by themselves. Losing the journal (Redis flushed or down) only brings back the old behaviour: the try counts
as `lease_expired` and is repeated.
"""

import json
import logging
import queue
import threading
from datetime import datetime

from delivery.engine import availability, redis_link
from delivery.rules.vocabulary import AttemptQueue
from delivery.transport.sender import SendResult

log = logging.getLogger(__name__)
KEY = "herald:answered:{}"
KEEP_SECONDS = 3 * 3600


def _key(delivery_id: int) -> str:
    return KEY.format(delivery_id)


_pending: queue.Queue = queue.Queue()
_failing = False  # the last write failed (Redis away)
CAUTIOUS_IN_FLIGHT = 8  # what a worker keeps in flight while its answers cannot be journaled
_writer: threading.Thread | None = None
_writer_lock = threading.Lock()


def watch(future, delivery, number: int, attempt_queue: str) -> None:
    """Journal this send's answer the moment it arrives: the transport's thread hands it to a writer thread, so
    neither the event loop nor a slow database write on the job's thread delays it."""
    _start_writer()
    delivery_id, lease = delivery.id, delivery.lease_until

    def answered_now(done) -> None:
        if lease is not None and not done.cancelled() and done.exception() is None and done.result() is not None:
            remember(delivery_id, lease, number, attempt_queue, done.result())

    future.add_done_callback(answered_now)


def remember(delivery_id: int, lease, number: int, attempt_queue: str, result: SendResult) -> None:
    """Hand one answer to the writer thread."""
    _start_writer()
    _pending.put((delivery_id, lease, number, attempt_queue, result))


def flush() -> None:
    """Wait until every answer handed over so far is written (or its write failed)."""
    _pending.join()


def _start_writer() -> None:
    global _writer
    if _writer is None:
        with _writer_lock:
            if _writer is None:
                _writer = threading.Thread(target=_write_forever, name="herald-journal", daemon=True)
                _writer.start()


def _write_forever() -> None:
    while True:
        batch = [_pending.get()]
        while True:
            try:
                batch.append(_pending.get_nowait())
            except queue.Empty:
                break
        try:
            _write(batch)
        finally:
            for _ in batch:
                _pending.task_done()


def writable() -> bool:
    """Are answers being journaled? While they are not (Redis away), a crash would repeat every answered send, so
    the pump keeps only CAUTIOUS_IN_FLIGHT requests in flight."""
    return not _failing


def _write(batch: list) -> None:
    """One pipeline for everything answered since the last write. Best effort: never raises."""
    global _failing
    try:
        with redis_link.connection(AttemptQueue.DELIVERIES).pipeline(transaction=False) as pipe:
            for delivery_id, lease, number, attempt_queue, result in batch:
                pipe.set(_key(delivery_id), json.dumps({
                    "lease": lease.isoformat(), "number": number, "queue": attempt_queue, "status": result.status,
                    "duration_ms": result.duration_ms, "started_at": result.started_at, "headers": result.headers,
                    "body_excerpt": result.body_excerpt, "error_class": result.error_class,
                    "error_detail": result.error_detail,
                }), ex=KEEP_SECONDS)
            pipe.execute()
        _failing = False
    except Exception as exc:
        if not _failing:
            availability.redis_failed(exc, log, "could not journal %d answers; a crash before they are recorded "
                                      "would repeat them", len(batch))
        _failing = True


def answered(deliveries) -> dict[int, tuple[int, str, SendResult]]:
    """{delivery id: (attempt number, queue, result)} for the deliveries whose current try (same lease) was
    answered before its worker stopped. Never raises: without Redis, nothing is known."""
    deliveries = [d for d in deliveries if d.lease_until is not None]
    if not deliveries:
        return {}
    try:
        values = redis_link.connection(AttemptQueue.DELIVERIES).mget([_key(d.id) for d in deliveries])
    except Exception as exc:
        availability.redis_failed(exc, log, "could not read the answers journal")
        return {}
    found = {}
    for delivery, value in zip(deliveries, values, strict=True):
        if value is None:
            continue
        try:
            entry = json.loads(value)
            if datetime.fromisoformat(entry["lease"]) != delivery.lease_until:
                continue  # an answer to an earlier try
            result = SendResult(status=entry["status"], duration_ms=entry["duration_ms"],
                                started_at=entry["started_at"], headers=entry["headers"],
                                body_excerpt=entry["body_excerpt"], error_class=entry["error_class"],
                                error_detail=entry["error_detail"])
            found[delivery.id] = (entry["number"], entry["queue"], result)
        except (ValueError, KeyError, TypeError):
            log.warning("delivery %s: an unreadable journal entry was ignored", delivery.id)
    return found

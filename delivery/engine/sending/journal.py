"""Sends that were answered but may not be recorded yet, kept in Redis until the database has them.

Each answer is written here within a few milliseconds of its arrival (a writer thread gathers a burst of them into
one pipeline), independently of recording it in PostgreSQL. If it dies before
recording (kill -9, a crash while the database is away), the reconciler finds the answer here when the row's lease
runs out and records it as the attempt it was, instead of counting a `lease_expired` try and sending the message
again. An entry names the lease it was sent under, so it is only ever applied to the try it belongs to. Losing the
journal (Redis flushed or down) only brings back the old behaviour: the try counts as `lease_expired` and is
repeated.

Entries are fields of a hash per block of BLOCK delivery ids (`herald:answers:<block>`), the field the delivery's
id: a burst of answers, mostly of neighbouring ids, is one HSET per block instead of one SET per answer (two
thirds of this thread's CPU, in redis-py's work per command). An entry goes as soon as its attempt is recorded; a
block expires KEEP_SECONDS after its last write, with any entry never forgotten (a write lost while Redis was away,
a worker killed between its commit and the forget).
"""

import json
import logging
import queue
import threading
import time
from datetime import datetime

from delivery.engine.plumbing import availability, redis_link
from delivery.rules import answers
from delivery.rules.vocabulary import AttemptQueue
from delivery.transport.posting import SendResult

log = logging.getLogger(__name__)
KEY = "herald:answers:{}"
BLOCK = 1024  # delivery ids per hash
OLD_KEY = "herald:answered:{}"  # an entry as workers before the blocks wrote it: read (a rolling upgrade), not written
KEEP_SECONDS = 3 * 3600  # a backstop: entries are deleted as soon as their attempt is recorded
FORGET = "forget"
# An entry's JSON: headers up to 8 KiB and a 4 KiB body, each character escaped to at most 6 (json.dumps's ASCII)
MAX_ENTRY_CHARS = 256 * 1024


def _key(delivery_id: int) -> str:
    """The hash that holds this delivery's entry."""
    return KEY.format(delivery_id // BLOCK)


def _by_key(delivery_ids) -> dict[str, list[int]]:
    keys: dict[str, list[int]] = {}
    for delivery_id in delivery_ids:
        keys.setdefault(_key(delivery_id), []).append(delivery_id)
    return keys


_pending: queue.Queue = queue.Queue()
_failing = False  # the last write failed (Redis away)
CAUTIOUS_IN_FLIGHT = 8  # what a worker keeps in flight while its answers cannot be journaled
GATHER_SECONDS = 0.005  # a writer's wait for more answers before it writes (attempts.GROUP_SECONDS is 0.02)
_writer: threading.Thread | None = None
_writer_lock = threading.Lock()


def watch(future, delivery, number: int, attempt_queue: str, same_as: int | None = None) -> None:
    """Journal this send's answer the moment it arrives: the transport's thread hands it to a writer thread, so
    neither the event loop nor a slow database write on the job's thread delays it."""
    start()
    delivery_id, lease = delivery.id, delivery.lease_until

    def answered_now(done) -> None:
        if lease is not None and not done.cancelled() and done.exception() is None and done.result() is not None:
            remember(delivery_id, lease, number, attempt_queue, done.result(), same_as)

    future.add_done_callback(answered_now)


def remember(delivery_id: int, lease, number: int, attempt_queue: str, result: SendResult,
             same_as: int | None = None) -> None:
    """Hand one answer to the writer thread. `same_as`: the delivery whose entry holds this answer (the first of
    the batch request that carried both); this entry only points at it."""
    start()
    _pending.put((delivery_id, lease, number, attempt_queue, result, same_as))


def forget(delivery_ids) -> None:
    """The answers of these deliveries are recorded in the database: their entries go (after any write of them
    still waiting in the writer's queue), so the journal holds only what is answered and not yet recorded."""
    if delivery_ids:
        start()
        _pending.put((FORGET, list(delivery_ids)))


def flush(timeout: float | None = None) -> bool:
    """Wait until every answer handed over so far is written (or its write failed); at most `timeout` seconds when
    given (a stopping worker does not wait on Redis for ever: what is not written is resent, at least once).
    Whether all of it was."""
    if timeout is None:
        _pending.join()
        return True
    until = time.monotonic() + timeout
    while _pending.unfinished_tasks and time.monotonic() < until:
        time.sleep(0.01)
    return not _pending.unfinished_tasks


def start() -> None:
    """The writer thread: a worker starts it with its other companions (engine/sending/worker.py); anything else
    that journals (a test's pump, the reconciler's send of a probe) starts it by journaling."""
    global _writer
    if _writer is None:
        with _writer_lock:
            if _writer is None:
                _writer = threading.Thread(target=_write_forever, name="herald-journal", daemon=True)
                _writer.start()


def _write_forever() -> None:
    while True:
        batch = [_pending.get()]
        # Answers come in bursts (a claim's sends complete together): what arrives within GATHER_SECONDS of the
        # first goes in the same pipeline, one write instead of one per few answers (a tenth of a worker's CPU was
        # this thread). An answer is journaled up to this much later: a worker killed in between repeats it.
        time.sleep(GATHER_SECONDS)
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
    """One pipeline for everything answered (and recorded) since the last write, in order: per block, the entries
    answered one after the other go in one HSET, and the recorded ones out in one HDEL. The deliveries of one batch
    request share its answer: it is written once, under the first of them, and the others point at it. Best
    effort: never raises."""
    global _failing
    try:
        # MULTI/EXEC: a block's HSET never without its EXPIRE (a hash without one would never go, nor be evicted)
        with redis_link.connection(AttemptQueue.DELIVERIES).pipeline(transaction=True) as pipe:
            written: dict[str, dict[int, str]] = {}
            for item in batch:
                if item[0] == FORGET:
                    _flush_entries(pipe, written)
                    for key, delivery_ids in _by_key(item[1]).items():
                        pipe.hdel(key, *delivery_ids)
                    continue
                delivery_id, lease, number, attempt_queue, result, same_as = item
                entry = {"lease": lease.isoformat(), "number": number, "queue": attempt_queue}
                if same_as is not None and same_as != delivery_id:
                    entry["same_as"] = same_as
                else:
                    entry |= _answer(result)
                written.setdefault(_key(delivery_id), {})[delivery_id] = json.dumps(entry)
            _flush_entries(pipe, written)
            pipe.execute()
        _failing = False
    except Exception as exc:
        if not _failing:
            availability.redis_failed(exc, log, "could not journal %d answers; a crash before they are recorded "
                                      "would repeat them", len(batch))
        _failing = True


def _flush_entries(pipe, written: dict[str, dict[int, str]]) -> None:
    for key, entries in written.items():
        pipe.hset(key, mapping=entries)
        pipe.expire(key, KEEP_SECONDS)
    written.clear()


def _answer(result: SendResult) -> dict:
    """What an entry keeps of an answer (the fields of a SendResult)."""
    return {"status": result.status, "duration_ms": result.duration_ms, "started_at": result.started_at,
            "headers": result.headers, "body_excerpt": result.body_excerpt, "error_class": result.error_class,
            "error_detail": result.error_detail}


def answered(deliveries) -> dict[int, tuple[int, str, SendResult]]:
    """{delivery id: (attempt number, queue, result)} for the deliveries whose current try (same lease) was
    answered before its worker stopped. Never raises: without Redis, nothing is known."""
    deliveries = [d for d in deliveries if d.lease_until is not None]
    if not deliveries:
        return {}
    try:
        connection = redis_link.connection(AttemptQueue.DELIVERIES)
        entries = _read(connection, [d.id for d in deliveries])
        shared = {entry["same_as"] for entry in entries.values()
                  if entry and isinstance(entry.get("same_as"), int)} - entries.keys()
        if shared:
            entries.update(_read(connection, shared))
    except Exception as exc:
        availability.redis_failed(exc, log, "could not read the answers journal")
        return {}
    found, unreadable = {}, []
    for delivery in deliveries:
        entry = entries.get(delivery.id)
        if not entry:
            continue
        try:
            if datetime.fromisoformat(entry["lease"]) != delivery.lease_until:
                continue  # an answer to an earlier try
            answer = entries.get(entry["same_as"]) if "same_as" in entry else entry
            if not answer or "status" not in answer:
                continue  # the request's answer is gone (recorded with the other deliveries, or expired)
            number, attempt_queue = entry["number"], entry["queue"]
            result = _result(answer)
            if result is None or not _is_int(number) or number < 1 or not isinstance(attempt_queue, str):
                raise ValueError("fields of the wrong type")
            found[delivery.id] = (number, attempt_queue, result)
        except Exception:  # whatever the entry holds, it is this row's problem alone
            log.warning("delivery %s: an unreadable journal entry was dropped; its try counts as lost", delivery.id)
            unreadable.append(delivery.id)
    forget(unreadable)
    return found


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _result(answer: dict) -> SendResult | None:
    """The SendResult an entry holds, or None if any field is not of its type (an entry is Herald's own writing,
    but it went through Redis: it is read as untrusted)."""
    status, duration, started = answer.get("status"), answer.get("duration_ms"), answer.get("started_at")
    headers = answer.get("headers")
    texts = [answer.get(name) for name in ("body_excerpt", "error_class", "error_detail")]
    if not (status is None or (_is_int(status) and 100 <= status <= 999)) or not _is_int(duration) or duration < 0:
        return None
    if not isinstance(started, int | float) or isinstance(started, bool) or not 0 <= started < 1e11:
        return None
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        return None
    if not all(isinstance(text, str) for text in texts):
        return None
    return SendResult(status=status, duration_ms=duration, started_at=float(started), headers=headers,
                      body_excerpt=texts[0], error_class=texts[1], error_detail=texts[2])


def _read(connection, delivery_ids) -> dict[int, dict | None]:
    """{delivery id: its entry or None}, one HMGET per block in one pipeline; for those not found, an entry as a
    worker of the previous version wrote it (one key each), so that an upgrade does not repeat their sends."""
    keys = _by_key(delivery_ids)
    with connection.pipeline(transaction=False) as pipe:
        for key, ids in keys.items():
            pipe.hmget(key, ids)
        values = pipe.execute()
    entries = {delivery_id: _parsed(value) for ids, found in zip(keys.values(), values, strict=True)
               for delivery_id, value in zip(ids, found, strict=True)}
    missing = [delivery_id for delivery_id, entry in entries.items() if entry is None]
    if missing:
        old = connection.mget([OLD_KEY.format(delivery_id) for delivery_id in missing])
        entries.update({delivery_id: _parsed(value) for delivery_id, value in zip(missing, old, strict=True)})
    return entries


def _parsed(value) -> dict | None:
    if value is None:
        return None
    entry, _ = answers.json_value(value, max_chars=MAX_ENTRY_CHARS)
    return entry if isinstance(entry, dict) else None

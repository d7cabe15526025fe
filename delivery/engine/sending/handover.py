"""Sends a pump still had in flight when its time was up, handed over to the next pump of its process
(engine/sending/pump.py), and recorded by a thread of the process when they complete before one takes them.
`handed_over` is the process's one registry of them; `settle` records what is left when the worker stops.
"""

import logging
import threading
import time
from concurrent.futures import FIRST_COMPLETED
from concurrent.futures import wait as concurrent_wait

from django.db import DatabaseError, close_old_connections, connections

from delivery.conf import herald
from delivery.engine.accounts import confirmation
from delivery.engine.plumbing.clock import now as database_now
from delivery.engine.sending import attempts

log = logging.getLogger(__name__)


class HandedOver:
    """Sends a pump still had in flight when its time was up, left on the process's transport. The next pump of
    this process takes over those still in flight (it counts them in their endpoints' rooms and records them as they
    complete); a recorder thread of the process records those that complete before (another worker may have taken
    the successor). A pump's successor thus never waits for a send that may take its whole timeout: an endpoint that
    accepts and never answers (15 s) kept both workers from claiming for seconds at each hand-over, a quiet tenant's
    fresh deliveries with them. Each answer is in the journal as it arrives, as always; a worker asked to stop
    records what is left before it exits (`settle`), and past their lease the reconciler would."""

    def __init__(self):
        self.lock = threading.Lock()
        self.waiting: dict = {}  # transport → (futures, probes, handshakes)
        self.recorder: threading.Thread | None = None
        self.wake = threading.Event()
        self.closing = threading.Event()  # the worker is stopping: the recorder ends, `settle` records

    def start(self) -> None:
        """The recorder thread: a worker starts it with its other companions (engine/sending/worker.py); a pump
        outside a worker (a test's) starts it when it first hands sends over."""
        with self.lock:
            self._start()

    def _start(self) -> None:
        if not self.closing.is_set() and (self.recorder is None or not self.recorder.is_alive()):
            self.recorder = threading.Thread(target=self._record_forever, name="herald-handed-over", daemon=True)
            self.recorder.start()

    def leave(self, transport, futures: dict, probes: set[int], handshakes: dict) -> None:
        with self.lock:
            left = self.waiting.setdefault(transport, ({}, set(), {}))
            left[0].update(futures)
            ids = {sending.delivery.id for sending in futures.values()}
            left[1].update(probes & ids)
            left[2].update(handshakes)
            self._start()
        self.wake.set()

    def take(self, transport, *, done_only: bool = False) -> tuple[dict, set[int], dict]:
        """What was left on `transport` (only what has completed, with `done_only`), no longer left."""
        with self.lock:
            if not done_only:
                return self.waiting.pop(transport, ({}, set(), {}))
            futures, probes, handshakes = self.waiting.get(transport, ({}, set(), {}))
            done = {f: s for f, s in futures.items() if f.done()}
            finished = {f: h for f, h in handshakes.items() if f.done()}
            for future in done:
                del futures[future]
            for future in finished:
                del handshakes[future]
            taken_probes = probes & {sending.delivery.id for sending in done.values()}
            probes -= taken_probes
            if not futures and not handshakes:
                self.waiting.pop(transport, None)
            return done, taken_probes, finished

    def transports(self) -> list:
        with self.lock:
            return list(self.waiting)

    def in_flight(self) -> list:
        with self.lock:
            return [f for futures, _, handshakes in self.waiting.values() for f in (*futures, *handshakes)]

    def _record_forever(self) -> None:
        while not self.closing.is_set():
            try:
                waiting = self.in_flight()
                if not waiting:
                    connections.close_all()  # this thread's own: nothing to record for now
                    self.wake.wait(1.0)
                    self.wake.clear()
                    continue
                concurrent_wait(waiting, timeout=1.0, return_when=FIRST_COMPLETED)
                time.sleep(attempts.GROUP_SECONDS)  # a group, not one statement per answer
                for transport in self.transports():
                    record_left(transport, self.take(transport, done_only=True), database_now)
            except Exception:  # never ends the thread: what is left waits for the next look
                log.exception("recording sends handed over by a pump failed; trying again")
                time.sleep(1.0)
        connections.close_all()


def record_left(transport, left: tuple[dict, set[int], dict], clock) -> bool:
    """Record sends (and handshakes) that were handed over and have completed. What the database could not take now
    (it is away) is left again, to be tried later; any other failure is logged and left to the reconciler (the
    answers are in the journal), so that one bad row cannot hold back the others. Never raises; whether all of it
    was recorded."""
    futures, probes, handshakes = left
    close_old_connections()  # this thread's connection, across a database restart
    kept: tuple[dict, set[int], dict] = ({}, set(), {})
    for future, handshake in handshakes.items():
        try:
            if not future.cancelled():
                confirmation.record_handshake(handshake, future.result(), clock())
        except DatabaseError:
            kept[2][future] = handshake
        except Exception:
            log.exception("a confirmation request handed over by a pump could not be recorded")
    if futures:
        try:
            attempts.record_sends(set(futures), futures, probes, clock())
        except DatabaseError:
            kept[0].update(futures)
            kept[1].update(probes)
        except Exception:
            log.exception("%d sends handed over by a pump could not be recorded; the reconciler records them from "
                          "the journal once their leases end", len(futures))
    if kept[0] or kept[2]:
        log.warning("sends handed over by a pump could not be recorded yet (the database); trying again")
        handed_over.leave(transport, *kept)
        time.sleep(1.0)
        return False
    return True


handed_over = HandedOver()  # the process's: a pump's successor may be any pump of the process


def settle(clock=database_now) -> None:
    """Record what a pump handed over and no pump took (the worker is stopping): wait for the answers, as a pump
    that stops does, and try the database for a few seconds. What cannot be recorded is left to the reconciler
    (the answers are in the journal). Never raises."""
    handed_over.closing.set()
    handed_over.wake.set()
    recorder = handed_over.recorder
    if recorder is not None:
        recorder.join(5.0)
    deadline = time.monotonic() + herald.SEND_START_WINDOW_SECONDS + attempts.MAX_TIMEOUT_SECONDS
    tries = 5
    while handed_over.transports() and tries:
        for transport in handed_over.transports():
            futures, probes, handshakes = handed_over.take(transport)
            concurrent_wait([*futures, *handshakes], timeout=max(0.0, deadline - time.monotonic()))
            done = {f: s for f, s in futures.items() if f.done()}
            if not record_left(transport, (done, probes, {f: h for f, h in handshakes.items() if f.done()}), clock):
                tries -= 1
    if handed_over.transports():
        log.warning("sends handed over by a pump were not recorded before the worker stopped; the reconciler records "
                    "them from the journal once their leases end")
    handed_over.closing.clear()  # (a process that goes on, as tests do, hands over again)

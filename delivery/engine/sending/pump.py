"""The pump: a worker's delivery loop. It takes due rows from the database in bulk, keeps the transport full, and
records results as they complete, until nothing is due and nothing is in flight.

- The unit of work follows what is due: each claim takes up to the free send slots (HERALD_MAX_IN_FLIGHT less
  what is in flight), however publishes arrived; a backlog drains in batches of hundreds.
- No head-of-line blocking: a claim skips endpoints whose slots are full and takes at most
  HERALD_MAX_IN_FLIGHT_PER_ENDPOINT rows of one endpoint, and results are recorded as they complete, so a hanging
  endpoint holds only its own rows while the pump keeps claiming and sending everyone else's.
- No added latency when idle: a new publish queues a pump at once (`queues.want_pump`); a running pump looks for
  new work whenever one is wanted, and lingers HERALD_PUMP_LINGER_SECONDS after its last work, watching for more,
  before it hands the worker back to RQ.
- A pump claims for HERALD_PUMP_SECONDS at most, then hands what is in flight to the next pump of its process
  (`HandedOver`) and asks for a successor, so RQ's bookkeeping (job timeouts, worker heartbeats) stays meaningful. A
  worker asked to stop stops claiming at once and finishes what is in flight.
"""

import logging
import os
import socket
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED
from concurrent.futures import wait as concurrent_wait

from django.db import DatabaseError, close_old_connections, connections

from delivery.conf import herald
from delivery.engine.accounts import confirmation
from delivery.engine.claiming import leases
from delivery.engine.plumbing import counters, queues
from delivery.engine.plumbing.clock import now as database_now
from delivery.engine.sending import attempts, journal
from delivery.transport import sender

log = logging.getLogger(__name__)
LOOK_INTERVAL_SECONDS = 0.25  # while sends are in flight and nothing new is wanted, look for due work this often
WATCH_SECONDS = 0.01  # while lingering, how often the pump checks whether new work was published
# At most this many rows per claim: the pump takes in the answers between claims, so a backlog fills the transport in
# a few rounds instead of one long one during which answers pile up unread (and a crash would repeat them all).
CLAIM_BATCH = 64
# New work announced while a backlog drains (another owner's publish, say) is looked for this often and taken by a
# claim of this size at once, before the next full claim: a fresh delivery waits for the step in progress, not for
# the next full claim after it (noisy-neighbour p50 209 → 152 ms, p99 468 → 354 ms; docs/benchmarks.md).
ANNOUNCED_LOOK_SECONDS = 0.02
ANNOUNCED_BATCH = 8
# A pump whose time is up waits this long for its answers, then hands what is still in flight to its successor: no
# claims are made meanwhile (a second's wait put 0.8 s into the p99 of a quiet tenant beside silent endpoints).
HAND_OVER_SECONDS = 0.1
# An endpoint answering 2xx in this long or more has its next round claimed ahead (`claim_and_start`).
AHEAD_AFTER_MS = 50
HANDSHAKES_PER_CLAIM = 16  # confirmation requests started per claim (each waits for its endpoint's room)
stopping = threading.Event()  # set by the worker on SIGTERM/SIGINT


class HandedOver:
    """Sends a pump still had in flight when its time was up, left on the process's transport. The next pump of
    this process takes over those still in flight (it counts them in their endpoints' rooms and records them as they
    complete); a recorder thread of the process records those that complete before (another worker may have taken
    the successor). A pump's successor thus never waits for a send that may take its whole timeout: an endpoint that
    accepts and never answers (15 s) kept both workers from claiming for seconds at each hand-over, a quiet tenant's
    fresh deliveries with them. Each answer is in the journal as it arrives, as always; a worker asked to stop
    records what is left before it exits (`settle_handed_over`), and past their lease the reconciler would."""

    def __init__(self):
        self.lock = threading.Lock()
        self.waiting: dict = {}  # transport → (futures, probes, handshakes)
        self.recorder: threading.Thread | None = None
        self.wake = threading.Event()
        self.closing = threading.Event()  # the worker is stopping: the recorder ends, `settle_handed_over` records

    def leave(self, transport, futures: dict, probes: set[int], handshakes: dict) -> None:
        with self.lock:
            left = self.waiting.setdefault(transport, ({}, set(), {}))
            left[0].update(futures)
            ids = {sending.delivery.id for sending in futures.values()}
            left[1].update(probes & ids)
            left[2].update(handshakes)
            if not self.closing.is_set() and (self.recorder is None or not self.recorder.is_alive()):
                self.recorder = threading.Thread(target=self._record_forever, name="herald-handed-over",
                                                 daemon=True)
                self.recorder.start()
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


handed_over = HandedOver()


def settle_handed_over(clock=database_now) -> None:
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


PROCESS = f"{socket.gethostname()}:{os.getpid()}"  # how the operators' figures name this process's send slots


class Pace:
    """The pump's loop state, and its decisions by name: when to look for due work, how much to claim, when to look
    for handshakes. Times are `time.monotonic()` readings, passed in."""

    def __init__(self, seen: int, stalls: int):
        self.last_look = 0.0
        self.more_due = True  # the last look found work or left some (endpoint room, batch size)
        self.freed = True  # sends completed (or gave their slot back) since the last look
        self.seen = seen  # the work sequence last seen: a change means new work was announced
        self.handshakes_look_at = 0.0
        self.announced_look_at = 0.0
        self.stalls = stalls
        self.slots_report_at = 0.0

    def claim_size(self, moment: float, announced: int | None) -> tuple[bool, int]:
        """(look now, how many rows at most). A look is due when the last one left work and sends completed since,
        or LOOK_INTERVAL_SECONDS passed; new work announced since (`announced`, the work sequence when it was read,
        else None) is taken at once by a small claim, before the next full one, unless a full one is due now
        anyway (it shares its rows across owners and tenants in turn, the announced work's too; a small claim
        before it would split one refill into two claims: the scheduler announces a backlog's due rows each
        tick)."""
        look = (self.more_due and self.freed) or moment - self.last_look >= LOOK_INTERVAL_SECONDS
        if announced is not None and announced != self.seen:
            self.seen = announced
            if not look:
                return True, ANNOUNCED_BATCH
        return look, CLAIM_BATCH

    def time_to_read_announcements(self, moment: float) -> bool:
        if moment < self.announced_look_at:
            return False
        self.announced_look_at = moment + ANNOUNCED_LOOK_SECONDS
        return True

    def time_for_handshakes(self, moment: float) -> bool:
        """A cheap look, but not one per claim of a backlog."""
        if moment < self.handshakes_look_at:
            return False
        self.handshakes_look_at = moment + LOOK_INTERVAL_SECONDS
        return True

    def time_to_report_slots(self, moment: float) -> bool:
        """Every SLOTS_REPORT_SECONDS: the process's send slots, for the operators' figures."""
        if moment < self.slots_report_at:
            return False
        self.slots_report_at = moment + counters.SLOTS_REPORT_SECONDS
        return True

    def claimed(self, moment: float, taken: int, more: bool, batch: int, pending: int) -> None:
        """After a claim of at most `batch` rows took `taken`. A full claim may be followed at once while little is
        in flight (a cold start, a slow endpoint's backlog); beyond that, claims follow completions. (Up to half
        the slots instead, 20 endpoints answering in 200 ms drained at 0.95-1.14x their ceiling against 0.80-0.88x,
        and the chaos run's kill -9 lost 4-5x as many sends to resend: docs/benchmarks.md, "Twenty endpoints
        answering in 200 ms, again".)"""
        self.last_look = moment
        small = batch < CLAIM_BATCH
        self.more_due = more or (small and self.more_due)
        self.freed = (taken == batch and pending < 2 * CLAIM_BATCH) or (small and self.freed)

    def stalled(self, stalls: int) -> bool:
        """A send stalled and gave its slot back: look again. Whether one did since the last call."""
        if stalls != self.stalls:
            self.stalls, self.freed = stalls, True
            return True
        return False

    def claim_next(self, claiming: bool, free: int) -> bool:
        return self.freed and self.more_due and claiming and free > 0

    def announced_while_lingering(self, latest: int) -> None:
        """New work was published while lingering: look at once, handshakes too."""
        self.more_due, self.freed, self.seen = True, True, latest
        self.handshakes_look_at = 0.0


def drain(queue_name: str, *, transport=None, clock=database_now) -> int:
    """Deliver until nothing is due and nothing is in flight; returns how many requests were sent. `transport`:
    the process's (sender.transport()) unless given; `clock`: what tells the time it claims and records at."""
    queues.pump_started(queue_name)
    transport = transport or sender.transport()
    per_endpoint = herald.MAX_IN_FLIGHT_PER_ENDPOINT
    claim_until = time.monotonic() + herald.PUMP_SECONDS
    sent = 0
    pace = Pace(queues.work_sequence(queue_name), getattr(transport, "stalls", 0))
    answered: set = set()  # sends completed, recorded after the claim that refills their slots
    answering: set[int] = set()  # endpoints whose latest answers were all 2xx: their next round is claimed ahead
    # What the previous pump of this process handed over: in flight still, counted and recorded here.
    futures, probes, handshakes = handed_over.take(transport)  # handshakes: {future: confirmation.Handshake}
    try:
        while True:
            claiming = time.monotonic() < claim_until and not stopping.is_set()
            free = transport.max_in_flight - transport.active  # (stalled sends hold no slot: rules/send_shares)
            if not journal.writable():  # what cannot be journaled would be resent after a crash: send little
                free = min(free, journal.CAUTIOUS_IN_FLIGHT - transport.pending)
            if claiming and free > 0:
                announced = (queues.work_sequence(queue_name) if pace.time_to_read_announcements(time.monotonic())
                             else None)
                look, batch = pace.claim_size(time.monotonic(), announced)
                if look:
                    moment, now = time.monotonic(), clock()
                    if pace.time_for_handshakes(moment):
                        handshakes.update(confirmation.start_handshakes(
                            now, min(free, HANDSHAKES_PER_CLAIM), transport=transport,
                            start_by=time.monotonic() + herald.SEND_START_WINDOW_SECONDS))
                    taken, more = claim_and_start(futures, probes, min(free, batch), per_endpoint,
                                                  transport=transport, now=now, answered=answered,
                                                  ahead=answering)
                    pace.claimed(moment, taken, more, batch, transport.pending)
            if answered:
                sent += attempts.record_sends(answered, futures, probes, clock())
                answered = set()
            if pace.stalled(getattr(transport, "stalls", 0)):
                answering.clear()  # some endpoint stopped answering: none is claimed ahead until it answers again
            if pace.time_to_report_slots(time.monotonic()):
                counters.report_slots(PROCESS, transport.active, transport.max_in_flight, time.time())
            if (futures or handshakes) and not claiming and not stopping.is_set() and \
                    time.monotonic() >= claim_until + HAND_OVER_SECONDS:
                # Time is up: what is still in flight after a short wait goes to the successor.
                handed_over.leave(transport, futures, probes, handshakes)
                futures, handshakes = {}, {}
                break
            if futures or handshakes:
                wait = 0 if pace.claim_next(claiming, free) else WATCH_SECONDS * 5
                done = attempts.next_group([*futures, *handshakes], timeout=wait)
                for future in [future for future in done if future in handshakes]:
                    confirmation.record_handshake(handshakes.pop(future), future.result(), clock())
                answered = {future for future in done if future in futures}
                answers_came(answering, answered, futures)
                if done:
                    pace.freed = True
                continue
            if pace.more_due and claiming:
                pace.freed = True
                continue
            if not claiming:
                break
            latest = linger(queue_name, pace.seen)
            if latest == pace.seen:
                break
            pace.announced_while_lingering(latest)
    except Exception:
        log.exception("a delivery pump failed; settling the %d deliveries it has in flight", len(futures))
        attempts.settle(futures, [])
        raise
    counters.report_slots(PROCESS, transport.active, transport.max_in_flight, time.time())
    if not stopping.is_set() and time.monotonic() >= claim_until:
        queues.want_pump(queue_name)  # its time is up, not necessarily the work
    return sent


def answers_came(answering: set[int], answered, futures: dict) -> None:
    """Keep `answering` up to date with a group of answers: the endpoints whose latest answers were all 2xx and
    took AHEAD_AFTER_MS or more. (A faster endpoint waits little for the next claim, and claiming ahead for a
    flood's fast endpoints took the process's slots from a quiet owner's fresh deliveries: its p99 beside the
    flood went from 107-109 to 138-192 ms.)"""
    slow, fast, bad = set(), set(), set()
    for future in answered:
        result = future.result()
        endpoint = futures[future].delivery.endpoint_id
        if result is None or not result.ok:
            bad.add(endpoint)
        else:
            (slow if result.duration_ms >= AHEAD_AFTER_MS else fast).add(endpoint)
    answering |= slow - bad - fast
    answering -= bad | fast


def claim_and_start(futures: dict, probes: set[int], free: int, per_endpoint: int, *, transport, now,
                    answered=frozenset(), ahead=frozenset()) -> tuple[int, bool]:
    """Claim what is due at `now` (within each endpoint's room) and start it; (rows claimed, whether more may be
    due).

    `answered`: sends completed and not yet recorded. A 2xx gives its slot back to this claim, so an endpoint's next
    requests go out before the write-back rather than after it. A failure or a probe holds its slot until it is
    recorded, so that its endpoint's health (a backoff, a freeze) is decided before the endpoint is sent more.

    `ahead`: endpoints that are answering 2xx, slowly (`answers_came`). Each may have a second room's worth
    claimed: those sends wait in the transport for the endpoint's slots (HERALD_STALLED_SEND_SECONDS at most; past
    it they are due again, not attempts) and start the moment a slot frees, instead of after the next claim.
    One endpoint answering in 200 ms otherwise waited ~25 ms of every round, between its answers and the claim
    that refills its slots. An endpoint that fails or stops answering (a stalled send) loses this until it answers
    2xx again, so what waits behind a silent or failing endpoint is never more than one room per worker."""
    in_flight: Counter = Counter()  # requests per endpoint (a batch's rows share one)
    failing = set()  # endpoints with a failure among `answered`: no room until it is recorded
    for future, sending in futures.items():
        if future in answered:
            result = future.result()
            if result is None or not result.ok:
                failing.add(sending.delivery.endpoint_id)
            elif sending.delivery.id not in probes:
                continue
        in_flight[sending.delivery.endpoint_id] += sending.weight
    for endpoint_id in ahead:
        in_flight[endpoint_id] -= per_endpoint
    for endpoint_id in failing:
        in_flight[endpoint_id] = max(in_flight[endpoint_id], per_endpoint)
    claimed, more = leases.claim_due(now, free, per_endpoint=per_endpoint, in_flight=in_flight,
                                     shares=(transport.active_by_share(), transport.max_in_flight))
    if claimed:
        # An endpoint claimed ahead: its sends wait for its room a stalled send's time at most (then they are due
        # again, not attempts). Those waiting hold one of the process's slots meanwhile, and an endpoint that stops
        # answering must not keep them for the whole start window. (Its sends that have room start at once; a
        # batch's rows stay together.)
        now_rows = [delivery for delivery in claimed if delivery.endpoint_id not in ahead]
        ahead_rows = [delivery for delivery in claimed if delivery.endpoint_id in ahead]
        for rows, window in ((now_rows, herald.SEND_START_WINDOW_SECONDS), (ahead_rows, herald.STALLED_SEND_SECONDS)):
            if rows:
                started, started_probes = attempts.start_sends(rows, None, now, transport=transport,
                                                               start_by=time.monotonic() + window)
                futures.update(started)
                probes |= started_probes
    return len(claimed), bool(claimed) or more


def linger(queue_name: str, seen: int) -> int:
    """Wait up to HERALD_PUMP_LINGER_SECONDS for new work to be announced; returns the work sequence (`seen` if
    nothing new came)."""
    until = time.monotonic() + herald.PUMP_LINGER_SECONDS
    while time.monotonic() < until and not stopping.is_set():
        latest = queues.work_sequence(queue_name)
        if latest != seen:
            return latest
        time.sleep(WATCH_SECONDS)
    return seen

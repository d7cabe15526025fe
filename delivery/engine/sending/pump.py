"""The pump: a worker's delivery loop. It takes due rows from the database in bulk, keeps the transport full, and
records results as they complete, until nothing is due and nothing is in flight. Its decisions of pace (when to
look, how much to claim) are rules/pump_pace.py's.

- The unit of work follows what is due: each claim takes up to the free send slots (HERALD_MAX_IN_FLIGHT less
  what is in flight), however publishes arrived; a backlog drains in batches of hundreds.
- No head-of-line blocking: a claim skips endpoints whose slots are full and takes at most
  HERALD_MAX_IN_FLIGHT_PER_ENDPOINT rows of one endpoint, and results are recorded as they complete, so a hanging
  endpoint holds only its own rows while the pump keeps claiming and sending everyone else's.
- No added latency when idle: a new publish queues a pump at once (`queues.want_pump`); a running pump looks for
  new work whenever one is wanted, and lingers HERALD_PUMP_LINGER_SECONDS after its last work, watching for more,
  before it hands the worker back to RQ.
- A pump claims for HERALD_PUMP_SECONDS at most, then hands what is in flight to the next pump of its process
  (engine/sending/handover.py) and asks for a successor, so RQ's bookkeeping (job timeouts, worker heartbeats)
  stays meaningful. A worker asked to stop stops claiming at once and finishes what is in flight.
"""

import logging
import os
import socket
import threading
import time
from collections import Counter

from delivery.conf import herald
from delivery.engine.accounts import confirmation
from delivery.engine.claiming import leases
from delivery.engine.plumbing import counters, queues
from delivery.engine.plumbing.clock import now as database_now
from delivery.engine.sending import attempts, handover, journal
from delivery.rules.pump_pace import Pace
from delivery.transport import sender

log = logging.getLogger(__name__)
ANSWERS_WAIT_SECONDS = 0.05  # with sends in flight and no claim to make, how long the pump waits for answers
# While lingering, how often a pump reads the work sequence when no announcement wakes it (another pump took the
# wake), and so how soon it notices that it is asked to stop.
WAKE_CHECK_SECONDS = 0.2
# A pump whose time is up waits this long for its answers, then hands what is still in flight to its successor: no
# claims are made meanwhile (a second's wait put 0.8 s into the p99 of a quiet tenant beside silent endpoints).
HAND_OVER_SECONDS = 0.1
# An endpoint answering 2xx in this long or more has its next round claimed ahead (`claim_and_start`).
AHEAD_AFTER_MS = 50
HANDSHAKES_PER_CLAIM = 16  # confirmation requests started per claim (each waits for its endpoint's room)
stopping = threading.Event()  # set by the worker on SIGTERM/SIGINT
PROCESS = f"{socket.gethostname()}:{os.getpid()}"  # how the operators' figures name this process's send slots


class Drain:
    """One pump's loop: what it has in flight, and the loop's steps by name (`run`)."""

    def __init__(self, queue_name: str, transport, clock):
        self.queue_name, self.transport, self.clock = queue_name, transport, clock
        self.per_endpoint = herald.MAX_IN_FLIGHT_PER_ENDPOINT
        self.claim_until = time.monotonic() + herald.PUMP_SECONDS
        self.sent = 0
        self.pace = Pace(queues.work_sequence(queue_name), getattr(transport, "stalls", 0))
        self.answered: set = set()  # sends completed, recorded after the claim that refills their slots
        self.answering: set[int] = set()  # endpoints answering 2xx: their next round is claimed ahead
        # What the previous pump of this process handed over: in flight still, counted and recorded here.
        # (handshakes: {future: confirmation.Handshake})
        self.futures, self.probes, self.handshakes = handover.handed_over.take(transport)

    def run(self) -> None:
        while True:
            claiming = time.monotonic() < self.claim_until and not stopping.is_set()
            free = self.free_slots()
            if claiming and free > 0:
                self.claim(free)
            self.record_and_report()
            if self.time_to_hand_over(claiming):
                # Time is up: what is still in flight after a short wait goes to the successor.
                handover.handed_over.leave(self.transport, self.futures, self.probes, self.handshakes)
                self.futures, self.handshakes = {}, {}
                return
            if self.futures or self.handshakes:
                self.take_answers(claiming, free)
                continue
            if self.pace.more_due and claiming:
                self.pace.freed = True
                continue
            if not claiming or not self.more_announced():
                return

    def free_slots(self) -> int:
        transport = self.transport
        free = transport.max_in_flight - transport.active  # (stalled sends hold no slot: rules/send_shares)
        if not journal.writable():  # what cannot be journaled would be resent after a crash: send little
            free = min(free, journal.CAUTIOUS_IN_FLIGHT - transport.pending)
        return free

    def claim(self, free: int) -> None:
        pace = self.pace
        moment = time.monotonic()
        announced = (queues.work_sequence(self.queue_name) if pace.time_to_read_announcements(moment)
                     and not self.gathered_when_lingering(moment) else None)
        look, batch = pace.claim_size(time.monotonic(), announced)
        if not look:
            return
        moment, now = time.monotonic(), self.clock()
        if pace.time_for_handshakes(moment):
            self.handshakes.update(confirmation.start_handshakes(
                now, min(free, HANDSHAKES_PER_CLAIM), transport=self.transport,
                start_by=time.monotonic() + herald.SEND_START_WINDOW_SECONDS))
        taken, more = claim_and_start(self.futures, self.probes, min(free, batch), self.per_endpoint,
                                      transport=self.transport, now=now, answered=self.answered,
                                      ahead=self.answering)
        pace.claimed(moment, taken, more, batch, self.transport.pending)

    def gathered_when_lingering(self, moment: float) -> bool:
        """In a stream of publishes, new work announced while nothing is in flight is left to the linger that
        follows, which gathers it (`more_announced`), rather than claimed at once, one publish a claim. (With sends in
        flight it is claimed at once: a flood's pump never lingers.)"""
        gather = herald.PUMP_GATHER_MS / 1000
        return bool(gather) and not self.futures and self.pace.streaming(moment, gather)

    def record_and_report(self) -> None:
        if self.answered:
            self.sent += attempts.record_sends(self.answered, self.futures, self.probes, self.clock())
            self.answered = set()
        if self.pace.stalled(getattr(self.transport, "stalls", 0)):
            self.answering.clear()  # some endpoint stopped answering: none is claimed ahead until it answers again
        if self.pace.time_to_report_slots(time.monotonic(), counters.SLOTS_REPORT_SECONDS):
            counters.report_slots(PROCESS, self.transport.active, self.transport.max_in_flight, time.time())

    def time_to_hand_over(self, claiming: bool) -> bool:
        return bool((self.futures or self.handshakes) and not claiming and not stopping.is_set()
                    and time.monotonic() >= self.claim_until + HAND_OVER_SECONDS)

    def take_answers(self, claiming: bool, free: int) -> None:
        wait = 0 if self.pace.claim_next(claiming, free) else ANSWERS_WAIT_SECONDS
        done = attempts.next_group([*self.futures, *self.handshakes], timeout=wait)
        for future in [future for future in done if future in self.handshakes]:
            confirmation.record_handshake(self.handshakes.pop(future), future.result(), self.clock())
        self.answered = {future for future in done if future in self.futures}
        answers_came(self.answering, self.answered, self.futures)
        if done:
            self.pace.freed = True

    def more_announced(self) -> bool:
        """Linger for new work; whether some was announced that this pump is to claim. In a stream of publishes
        one pump gathers them for HERALD_PUMP_GATHER_MS (`queues.take_look`); another that finds it gathering leaves
        the work to it for a gathering time, then lingers again (rather than be woken by every publish the other
        gathers). Waiting only what was left of the other's gathering made the rounds smaller: at 100 msgs/s the
        workers spent 2.7 ms per message instead of 2.2-2.4, for a publish → receipt p50 of 26 ms instead of 29-33."""
        while time.monotonic() < self.claim_until:
            latest = linger(self.queue_name, self.pace.seen)
            if latest == self.pace.seen:
                return False
            gather = self.pace.gather_for(time.monotonic(), herald.PUMP_GATHER_MS / 1000)
            if gather and not queues.take_look(self.queue_name, herald.PUMP_GATHER_MS):
                self.pace.seen = latest
                if stopping.wait(gather):
                    return False
                continue
            if stopping.wait(gather):  # asked to stop while gathering: the work is announced again for another
                queues.want_pump(self.queue_name)
                return False
            self.pace.announced_while_lingering(latest)
            return True
        return False


def drain(queue_name: str, *, transport=None, clock=database_now) -> int:
    """Deliver until nothing is due and nothing is in flight; returns how many requests were sent. `transport`:
    the process's (sender.transport()) unless given; `clock`: what tells the time it claims and records at."""
    queues.pump_started(queue_name)
    loop = Drain(queue_name, transport or sender.transport(), clock)
    try:
        loop.run()
    except Exception:
        log.exception("a delivery pump failed; settling the %d deliveries it has in flight", len(loop.futures))
        attempts.settle(loop.futures, [])
        raise
    counters.report_slots(PROCESS, loop.transport.active, loop.transport.max_in_flight, time.time())
    if not stopping.is_set() and time.monotonic() >= loop.claim_until:
        queues.want_pump(queue_name)  # its time is up, not necessarily the work
    return loop.sent


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
    return len(claimed), more


def linger(queue_name: str, seen: int) -> int:
    """Wait up to HERALD_PUMP_LINGER_SECONDS for new work to be announced; returns the work sequence (`seen` if
    nothing new came). The pump blocks on the announcements (`queues.await_work`), reading the sequence when woken
    and every WAKE_CHECK_SECONDS. Reading it every 10 ms instead cost the workers about 7.7 ms and Redis 0.9 ms of
    CPU per message at a steady 10 publishes a second (docs/benchmarks.md, "Waiting for work")."""
    until = time.monotonic() + herald.PUMP_LINGER_SECONDS
    while not stopping.is_set():
        latest = queues.work_sequence(queue_name)
        left = until - time.monotonic()
        if latest != seen or left <= 0:
            return latest
        if queues.await_work(queue_name, min(left, WAKE_CHECK_SECONDS)) and stopping.is_set():
            queues.pass_wake(queue_name)  # woken as its worker stops: another lingering pump takes the work
    return seen

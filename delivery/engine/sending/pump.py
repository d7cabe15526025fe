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
- A pump claims for HERALD_PUMP_SECONDS at most, then finishes what is in flight and asks for a successor, so RQ's
  bookkeeping (job timeouts, worker heartbeats) stays meaningful. A worker asked to stop stops claiming at once.
"""

import logging
import threading
import time
from collections import Counter

from delivery.conf import herald
from delivery.engine.accounts import confirmation
from delivery.engine.claiming import leases
from delivery.engine.plumbing import queues
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
HANDSHAKES_PER_CLAIM = 16  # confirmation requests started per claim (each waits for its endpoint's room)
stopping = threading.Event()  # set by the worker on SIGTERM/SIGINT


def drain(queue_name: str, *, transport=None, clock=database_now) -> int:
    """Deliver until nothing is due and nothing is in flight; returns how many requests were sent. `transport`:
    the process's (sender.transport()) unless given; `clock`: what tells the time it claims and records at."""
    queues.pump_started(queue_name)
    transport = transport or sender.transport()
    per_endpoint = herald.MAX_IN_FLIGHT_PER_ENDPOINT
    claim_until = time.monotonic() + herald.PUMP_SECONDS
    futures: dict = {}
    handshakes: dict = {}  # confirmation requests on their way: {future: confirmation.Handshake}
    probes: set[int] = set()
    sent = 0
    # `more_due`: the last look found work or left some (endpoint room, batch size); `freed`: sends completed since.
    last_look, more_due, freed, seen = 0.0, True, True, queues.work_sequence(queue_name)
    handshakes_look_at = announced_look_at = 0.0
    stalls_seen = getattr(transport, "stalls", 0)
    try:
        while True:
            claiming = time.monotonic() < claim_until and not stopping.is_set()
            free = transport.max_in_flight - transport.active  # (stalled sends hold no slot: rules/send_shares)
            if not journal.writable():  # what cannot be journaled would be resent after a crash: send little
                free = min(free, journal.CAUTIOUS_IN_FLIGHT - transport.pending)
            if claiming and free > 0:
                look = (more_due and freed) or time.monotonic() - last_look >= LOOK_INTERVAL_SECONDS
                batch = CLAIM_BATCH
                if time.monotonic() >= announced_look_at:
                    announced_look_at = time.monotonic() + ANNOUNCED_LOOK_SECONDS
                    latest = queues.work_sequence(queue_name)
                    if latest != seen:  # new work was announced: a small claim at once, before the next big one
                        look, seen, batch = True, latest, ANNOUNCED_BATCH
                if look:
                    last_look = time.monotonic()
                    now = clock()
                    if time.monotonic() >= handshakes_look_at:  # a cheap look, but not one per claim of a backlog
                        handshakes_look_at = time.monotonic() + LOOK_INTERVAL_SECONDS
                        handshakes.update(confirmation.start_handshakes(
                            now, min(free, HANDSHAKES_PER_CLAIM), transport=transport,
                            start_by=time.monotonic() + herald.SEND_START_WINDOW_SECONDS))
                    taken, more = claim_and_start(futures, probes, min(free, batch), per_endpoint,
                                                  transport=transport, now=now)
                    more_due = more or (batch < CLAIM_BATCH and more_due)
                    # A full claim may be followed at once while little is in flight (a cold start, a slow
                    # endpoint's backlog); beyond that, claims follow completions.
                    freed = (taken == batch and transport.pending < 2 * CLAIM_BATCH) or (batch < CLAIM_BATCH and freed)
            stalls = getattr(transport, "stalls", 0)
            if stalls != stalls_seen:  # a send stalled and gave its slot back: look again
                stalls_seen, freed = stalls, True
            if futures or handshakes:
                claim_next = freed and more_due and claiming and free > 0
                done = attempts.next_group([*futures, *handshakes], timeout=0 if claim_next else WATCH_SECONDS * 5)
                for future in [future for future in done if future in handshakes]:
                    confirmation.record_handshake(handshakes.pop(future), future.result(), clock())
                delivered = {future for future in done if future in futures}
                if delivered:
                    sent += attempts.record_sends(delivered, futures, probes, clock())
                if done:
                    freed = True
                continue
            if more_due and claiming:
                freed = True
                continue
            if not claiming:
                break
            latest = linger(queue_name, seen)
            if latest == seen:
                break
            more_due, freed, seen = True, True, latest  # new work was published while lingering: look at once
            handshakes_look_at = 0.0
    except Exception:
        log.exception("a delivery pump failed; settling the %d deliveries it has in flight", len(futures))
        attempts.settle(futures, [])
        raise
    if not stopping.is_set() and time.monotonic() >= claim_until:
        queues.want_pump(queue_name)  # its time is up, not necessarily the work
    return sent


def claim_and_start(futures: dict, probes: set[int], free: int, per_endpoint: int, *, transport,
                    now) -> tuple[int, bool]:
    """Claim what is due at `now` (within each endpoint's room) and start it; (rows claimed, whether more may be
    due)."""
    in_flight: Counter = Counter()  # requests per endpoint (a batch's rows share one)
    for sending in futures.values():
        in_flight[sending.delivery.endpoint_id] += sending.weight
    claimed, more = leases.claim_due(now, free, per_endpoint=per_endpoint, in_flight=in_flight,
                                     shares=(transport.active_by_share(), transport.max_in_flight))
    if claimed:
        started, started_probes = attempts.start_sends(claimed, None, now, transport=transport,
                                                 start_by=time.monotonic() + herald.SEND_START_WINDOW_SECONDS)
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

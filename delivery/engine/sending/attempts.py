"""The attempt path: claim due deliveries, decide what may be sent, send outside any transaction, record.

Sends go to the process's transport (an event loop with hundreds of requests in flight); all database work stays
on the job's thread, and results are recorded in small groups as they complete, so a slow endpoint holds back
nobody else's. Claiming and writing back under a lease live in `leases.py`, turning rows into requests (envelopes,
batches) in `outgoing.py`, recording in `recording.py`.

A failure is contained to what it concerns: a row that cannot be prepared gets an `internal` attempt (it counts,
so its retry limits end it); a job that fails as a whole settles what it claimed before it ends (what was sent is
recorded, the rest is due again shortly), so no row waits for its lease to run out.
"""

import logging
import time
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass
from datetime import timedelta

from django.db import InterfaceError, OperationalError, connection

from delivery.conf import herald
from delivery.engine.claiming import leases, throttle
from delivery.engine.plumbing import clock, tracing
from delivery.engine.sending import journal, outgoing, recording, spans
from delivery.engine.sending.recording import Tried
from delivery.engine.state import health, transitions
from delivery.engine.state.effective import subscription_policy_or_default
from delivery.models import Delivery
from delivery.rules import circuit, decisions
from delivery.rules.send_shares import share_of
from delivery.rules.vocabulary import AttemptOutcome, AttemptQueue, DeadLetterReason
from delivery.transport import sender
from subscriptions.models import Subscription

log = logging.getLogger(__name__)
RELEASE_DELAY_SECONDS = 1.0  # after a failed job: soon, but not in a tight loop if the failure repeats
GROUP_SECONDS = 0.02  # sends that complete this close together are recorded in one statement
SETTLE_RETRY_PAUSES = (0, 0.5, 1, 2, 4)  # seconds before each try at settling while the database is away
MAX_TIMEOUT_SECONDS = 60  # the longest requestPolicy.timeoutSeconds a policy may set


def gated(ready: list, updates: dict, now) -> tuple[list, set[int]]:
    """Endpoint health decides: active sends; disabled sends one probe per interval and holds the rest; frozen
    holds everything. Holding spends no attempt."""
    allowed, probes, probing = [], set(), {}
    for delivery, policy in ready:
        state = delivery.endpoint.state
        if state == circuit.ACTIVE:
            allowed.append((delivery, policy))
            continue
        endpoint_id = delivery.endpoint_id
        if state == circuit.DISABLED and endpoint_id not in probing:
            probing[endpoint_id] = health.take_probe_slot(endpoint_id, now)
            if probing[endpoint_id]:
                allowed.append((delivery, policy))
                probes.add(delivery.id)
                continue
        updates[delivery.id] = transitions.on_hold()
    return allowed, probes


def throttled(units: list[list], updates: dict, now) -> tuple[list[list], dict[int, float]]:
    """Keep the requests (`units`: the rows each request carries, one or a batch) that the subscriptions' throttles
    allow now; defer the rest to when a slot frees (not an attempt). A slot is a request, whatever it carries.
    Returns the kept units and, for the throttled ones, the monotonic time by which each send must start (keyed by
    the unit's first row): a slot counts from its grant, so a send that starts later (a loaded worker) could crowd
    the next second's sends at the receiver; it is put back unsent instead."""
    by_subscription = defaultdict(list)
    deadlines: dict[int, float] = {}
    for unit in units:
        by_subscription[unit[0][0].subscription_id].append(unit)
    allowed = []
    for subscription_id, items in by_subscription.items():
        rate = items[0][0][1].max_receives_per_second
        if rate is None:
            allowed.extend(items)
            continue
        asked = time.monotonic()  # no later than the grant
        token = f"{items[0][0][0].id}:{now.timestamp()}"
        granted, wait = throttle.acquire(subscription_id, rate, len(items), token=token)
        allowed.extend(items[:granted])
        deadlines.update({unit[0][0].id: asked + throttle.START_SLACK_SECONDS for unit in items[:granted]})
        for unit in items[granted:]:
            for delivery, _ in unit:
                updates[delivery.id] = transitions.deferred(now + timedelta(seconds=max(wait, 0.001)))
    return allowed, deadlines


def prepare(claimed: list[Delivery], updates: dict, failed: list[Tried], queue_name: str, now) -> list:
    """(delivery, policy) of each claimed row that is to be sent now; the others get their changes in `updates`
    (held, expired) or, when preparing them failed, a try in `failed`."""
    ready = []
    for delivery in claimed:
        policy, unreadable = subscription_policy_or_default(delivery.subscription)
        if unreadable is not None:
            failed.append(recording.internal_failure(delivery, policy, unreadable, queue_name))
            continue
        if delivery.subscription.status != Subscription.Status.CONFIRMED:
            updates[delivery.id] = transitions.on_hold()
            continue
        if policy.outlived(delivery.budget_start, now):
            expired = decisions.give_up(policy, DeadLetterReason.TTL_EXPIRED, AttemptOutcome.RETRYABLE_FAILURE)
            updates[delivery.id] = transitions.decided(expired, now=now)
            continue
        ready.append((delivery, policy))
    return ready


@dataclass(frozen=True)
class Sending:
    """One request on its way: what `start_sends` handed to the transport."""

    delivery: Delivery
    policy: object
    number: int
    request: object
    queue: str
    batch: int = 1  # how many deliveries its request carries
    span: object = None  # its `herald attempt` span, when tracing is on

    def tried(self, result) -> Tried:
        return Tried(self.delivery, self.policy, self.number, self.request, result, self.queue, self.span)

    @property
    def weight(self) -> float:
        """Its share of an endpoint's send slots: a batch's request takes one slot, whatever it carries."""
        return 1 / self.batch

def queue_label(delivery: Delivery) -> str:
    return AttemptQueue.DELIVERIES if delivery.attempt_count == 0 else AttemptQueue.RETRIES


def start_sends(claimed: list[Delivery], label: str | None, now, *, start_by=None,
          transport=None) -> tuple[dict, set[int]]:
    """Decide what each claimed row needs, hand the sends to the transport and record the rest (held, deferred,
    expired, failed to prepare) at once. Returns ({future: Sending}, probe ids). `label` is what the attempts
    record as their queue; None means by the row (first attempt or retry). `transport`: the process's
    (`sender.submit`) unless given."""
    submit = transport.submit if transport is not None else sender.submit
    updates: dict[int, dict] = {}
    failed: list[Tried] = []
    futures: dict = {}
    try:
        ready = prepare(claimed, updates, failed, label or AttemptQueue.DELIVERIES, now)
        ready, probes = gated(ready, updates, now)
        units, prepared = outgoing.batched(ready, probes)
        units, deadlines = throttled(units, updates, now)
        built = outgoing.build_requests(units, failed, label or AttemptQueue.DELIVERIES, prepared)
        for unit, numbers, request in built:
            leader, policy = unit[0]
            traced = spans.started(unit, numbers)  # None when tracing is off
            if traced:
                request = spans.carried(request, traced[0], leader.subscription)
            deadline = deadlines.get(leader.id, start_by)
            if start_by is not None and deadline is not None:
                deadline = min(deadline, start_by)
            with tracing.quiet_http():  # a host's HTTP instrumentation adds no span or header of its own
                sent = submit(request, timeout=policy.timeout_seconds, key=leader.endpoint_id,
                              share=share_of(leader.owner_id, leader.tenant_id), start_by=deadline)
            members = [sent] if len(unit) == 1 else outgoing.fan_in(sent, len(unit))
            for n, (future, (delivery, policy), number) in enumerate(zip(members, unit, numbers, strict=True)):
                queue = AttemptQueue.PROBE if delivery.id in probes else label or queue_label(delivery)
                # a crash before recording no longer means resending; a batch's answer is journaled once
                journal.watch(future, delivery, number, queue, same_as=leader.id if len(unit) > 1 else None)
                futures[future] = Sending(delivery, policy, number, request, queue, len(unit),
                                          traced[n] if traced else None)
        recording.record(claimed, failed, updates, probes, now)
    except Exception:
        log.exception("starting %d claimed deliveries failed; settling them", len(claimed))
        settle(futures, failed, claimed)
        raise
    return futures, probes


def record_sends(done, futures: dict, probes: set[int], now) -> int:
    """Record a group of completed sends and forget them; a send its endpoint's slots never let start is due again
    shortly, not an attempt. Returns how many were sent. If recording fails, `futures` still holds the group for
    `settle`."""
    tries, unsent, deliveries = [], {}, []
    for future in done:
        sending = futures[future]
        deliveries.append(sending.delivery)
        result = future.result()
        if result is None:
            unsent[sending.delivery.id] = transitions.deferred(now + timedelta(seconds=RELEASE_DELAY_SECONDS))
            spans.not_sent(sending.span)
        else:
            tries.append(sending.tried(result))
    recording.record(deliveries, tries, unsent, probes, now)
    journal.forget([tried.delivery.id for tried in tries])
    for future in done:
        del futures[future]
    return len(tries)


def process(delivery_ids: list[int], queue_name: str, *, now=None) -> int:
    """Attempt every claimable delivery in `delivery_ids` that is due at `now`, and wait for the answers; returns
    how many were sent."""
    now = now or clock.now()
    claimed = leases.claim(delivery_ids, now)
    if not claimed:
        return 0
    futures, probes = start_sends(claimed, queue_name, now)
    sent = 0
    try:
        for done in as_recorded(list(futures)):
            sent += record_sends(done, futures, probes, clock.now())
    except Exception:
        log.exception("a delivery job failed; settling the %d deliveries it claimed", len(claimed))
        settle(futures, [])
        raise
    return sent


def next_group(futures, timeout: float | None = None) -> set:
    """The sends that complete next, as one group: what finished within GROUP_SECONDS of the first of it (empty if
    none finished within `timeout`). Recording as sends complete keeps one slow endpoint from holding back the
    others' results, and keeps what a dying worker leaves unrecorded (and so resent later) to a few milliseconds'
    worth of sends."""
    done, remaining = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
    if done and remaining:
        more, _ = wait(remaining, timeout=GROUP_SECONDS)
        done |= more
    return done


def as_recorded(futures):
    """Every send, in groups as they complete."""
    remaining = set(futures)
    while remaining:
        done = next_group(remaining)
        remaining -= done
        yield done


def settle(futures: dict, tries: list[Tried], claimed=()) -> None:
    """After a failure: the sends already on their way finish and are recorded with what was tried (each row
    alone); every other row is due again shortly. Rows whose lease is no longer ours, or that were recorded
    already, are left as they are.

    When the database itself went away (a restart, a failover), the broken connection is dropped and recording is
    tried again for a few seconds, well within the lease: a send that reached its endpoint is then recorded rather
    than repeated after the lease runs out."""
    wait(list(futures), timeout=herald.SEND_START_WINDOW_SECONDS + MAX_TIMEOUT_SECONDS)
    tries = list(tries)
    for future, sending in futures.items():
        result = future.result() if future.done() and not future.cancelled() else None
        if result is not None:
            tries.append(sending.tried(result))
        else:
            spans.not_sent(sending.span)
    deliveries = {delivery.id: delivery for delivery in claimed}
    for sending in futures.values():
        deliveries[sending.delivery.id] = sending.delivery
    for tried in tries:
        deliveries[tried.delivery.id] = tried.delivery
    due = clock.now() + timedelta(seconds=RELEASE_DELAY_SECONDS)
    changes, attempts, _ = recording.outcomes(tries)
    untried = {delivery_id: transitions.deferred(due) for delivery_id in deliveries if delivery_id not in changes}
    failure = None
    for pause in SETTLE_RETRY_PAUSES:
        time.sleep(pause)
        try:
            written = recording.record_one_by_one(list(deliveries.values()), {**untried, **changes}, attempts)
            journal.forget([tried.delivery.id for tried in tries])
            spans.ended(tries, attempts, written)
            return
        except (OperationalError, InterfaceError) as exc:
            failure = exc
            connection.close()  # the next query opens a fresh connection
        except Exception as exc:
            failure = exc
            break
    # the database is gone for longer: the leases run out and the reconciler counts the tries
    log.error("could not settle the claimed deliveries; their leases will expire", exc_info=failure)

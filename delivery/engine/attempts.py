"""The attempt path: claim due deliveries, decide what may be sent, send outside any transaction, record.

Sends run concurrently on a small per-process thread pool so one slow endpoint does not stall the batch; all
database work stays on the job's thread. Claiming and writing back under a lease live in `leases.py`, recording
in `recording.py`.

A failure is contained to what it concerns: a row that cannot be prepared gets an `internal` attempt (it counts,
so its retry limits end it); a job that fails as a whole settles what it claimed before it ends (what was sent is
recorded, the rest is due again shortly), so no row waits for its lease to run out.
"""

import logging
import time
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from delivery.engine import health, leases, recording, throttle, transitions
from delivery.engine.effective import subscription_policy_or_default
from delivery.engine.recording import Tried
from delivery.models import Attempt, Delivery
from delivery.rules import circuit, decisions, wire
from delivery.rules.storable import clean_text
from delivery.rules.vocabulary import AttemptOutcome, DeadLetterReason
from delivery.transport import sender
from delivery.transport.sender import SendResult
from subscriptions.models import Subscription

log = logging.getLogger(__name__)
RELEASE_DELAY_SECONDS = 1.0  # after a failed job: soon, but not in a tight loop if the failure repeats
GROUP_SECONDS = 0.02  # sends that complete this close together are recorded in one statement
SETTLE_RETRY_PAUSES = (0, 0.5, 1, 2, 4)  # seconds before each try at settling while the database is away
_pool: ThreadPoolExecutor | None = None


def pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=settings.HERALD_SENDER_THREADS, thread_name_prefix="herald-send")
    return _pool


def envelope(delivery: Delivery, policy) -> wire.Envelope:
    message, subscription = delivery.message, delivery.subscription
    return wire.Envelope(
        message_id=str(message.id),
        topic_name=message.topic.name,
        event_type=message.event_type,
        subject=message.subject,
        published_at=message.published_at,
        payload=message.payload,
        payload_is_text=message.payload_is_text,
        subscription_id=subscription.id,
        url=delivery.endpoint.url,
        raw=subscription.raw_message_delivery,
        secrets=subscription.signing_secrets(timezone.now()),
        content_type=policy.content_type,
        user_agent=f"Herald/{settings.VERSION}",
    )


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
        updates[delivery.id] = transitions.held()
    return allowed, probes


def throttled(ready: list, updates: dict, now) -> list:
    """Keep what the subscriptions' throttles allow now; defer the rest to when a slot frees (not an attempt)."""
    by_subscription = defaultdict(list)
    for delivery, policy in ready:
        by_subscription[delivery.subscription_id].append((delivery, policy))
    allowed = []
    for subscription_id, items in by_subscription.items():
        rate = items[0][1].max_receives_per_second
        if rate is None:
            allowed.extend(items)
            continue
        granted, wait = throttle.acquire(subscription_id, rate, len(items), token=f"{items[0][0].id}:{now.timestamp()}")
        allowed.extend(items[:granted])
        for delivery, _ in items[granted:]:
            updates[delivery.id] = transitions.deferred(now + timedelta(seconds=max(wait, 0.001)))
    return allowed


def internal_failure(delivery: Delivery, policy, exc: Exception, queue_name: str) -> Tried:
    """A try that failed inside Herald before anything was sent. It counts, so the policy's limits end it."""
    result = SendResult(status=None, duration_ms=0, started_at=time.time(), error_class=Attempt.ErrorClass.INTERNAL,
                        error_detail=clean_text(f"{type(exc).__name__}: {exc}", 1024))
    return Tried(delivery, policy, delivery.attempt_count + 1, None, result, queue_name)


def prepare(claimed: list[Delivery], updates: dict, failed: list[Tried], queue_name: str, now) -> list:
    """(delivery, policy) of each claimed row that is to be sent now; the others get their changes in `updates`
    (held, expired) or, when preparing them failed, a try in `failed`."""
    ready = []
    for delivery in claimed:
        policy, unreadable = subscription_policy_or_default(delivery.subscription)
        if unreadable is not None:
            failed.append(internal_failure(delivery, policy, unreadable, queue_name))
            continue
        if delivery.subscription.status != Subscription.Status.CONFIRMED:
            updates[delivery.id] = transitions.held()
            continue
        if policy.outlived(delivery.budget_start, now):
            expired = decisions.give_up(policy, DeadLetterReason.TTL_EXPIRED, AttemptOutcome.RETRYABLE_FAILURE)
            updates[delivery.id] = transitions.decided(expired, now=now)
            continue
        ready.append((delivery, policy))
    return ready


def build(ready: list, failed: list[Tried], queue_name: str) -> list:
    """(delivery, policy, number, request) to send; a row whose request cannot be built fails alone."""
    built = []
    for delivery, policy in ready:
        number = delivery.attempt_count + 1
        try:
            request = wire.build_request(envelope(delivery, policy), attempt_number=number, now=timezone.now())
        except Exception as exc:
            log.exception("delivery %s: its request could not be built", delivery.id)
            failed.append(internal_failure(delivery, policy, exc, queue_name))
            continue
        built.append((delivery, policy, number, request))
    return built


def process(delivery_ids: list[int], queue_name: str, *, now=None) -> int:
    """Attempt every claimable delivery in `delivery_ids` that is due at `now`; returns how many were sent."""
    now = now or timezone.now()
    claimed = leases.claim(delivery_ids, now)
    if not claimed:
        return 0
    updates: dict[int, dict] = {}
    tries: list[Tried] = []
    probes: set[int] = set()
    try:
        ready = prepare(claimed, updates, tries, queue_name, now)
        ready, probes = gated(ready, updates, now)
        ready = throttled(ready, updates, now)
        to_send = build(ready, tries, queue_name)
        futures = {pool().submit(sender.send, item[3], timeout=item[1].timeout_seconds): item for item in to_send}
        recording.record(claimed, tries, updates, probes)  # what needs no send, and what failed to prepare
        for done in as_recorded(futures):
            group = []
            for future in done:
                delivery, policy, number, request = futures[future]
                queue = Attempt.Queue.PROBE if delivery.id in probes else queue_name
                group.append(Tried(delivery, policy, number, request, future.result(), queue))
            tries.extend(group)
            recording.record(claimed, group, {}, probes)
    except Exception:
        log.exception("a delivery job failed; settling the %d deliveries it claimed", len(claimed))
        settle(claimed, tries)
        raise
    return sum(1 for tried in tries if tried.request is not None)


def as_recorded(futures):
    """The sends in groups as they complete: each group is what finished within GROUP_SECONDS of the first of it.
    Recording as sends complete keeps one slow endpoint from holding back the others' results, and keeps what a
    dying worker leaves unrecorded (and so resent later) to a few milliseconds' worth of sends."""
    remaining = set(futures)
    while remaining:
        done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
        if remaining:
            more, remaining = wait(remaining, timeout=GROUP_SECONDS)
            done |= more
        yield done


def settle(claimed: list[Delivery], tries: list[Tried]) -> None:
    """After a failed job: what was tried is recorded (each row alone); the rest is due again shortly. Rows whose
    lease is no longer ours, or that were recorded already, are left as they are.

    When the database itself went away (a restart, a failover), the broken connection is dropped and recording is
    tried again for a few seconds, well within the lease: a send that reached its endpoint is then recorded rather
    than repeated after the lease runs out."""
    due = timezone.now() + timedelta(seconds=RELEASE_DELAY_SECONDS)
    changes, attempts, _ = recording.outcomes(tries)
    untried = {delivery.id: transitions.deferred(due) for delivery in claimed if delivery.id not in changes}
    failure = None
    for pause in SETTLE_RETRY_PAUSES:
        time.sleep(pause)
        try:
            recording.record_one_by_one(claimed, {**untried, **changes}, attempts)
            return
        except (OperationalError, InterfaceError) as exc:
            failure = exc
            connection.close()  # the next query opens a fresh connection
        except Exception as exc:
            failure = exc
            break
    # the database is gone for longer: the leases run out and the reconciler counts the tries
    log.error("could not settle the claimed deliveries; their leases will expire", exc_info=failure)

"""The attempt path: claim due deliveries, decide what may be sent, send outside any transaction, record.

Sends run concurrently on a small per-process thread pool so one slow endpoint does not stall the batch; all
database work stays on the job's thread. Claiming and writing back under a lease live in `leases.py`.
"""

import random
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from subscriptions.models import Subscription

from . import circuit, decisions, health, leases, sender, throttle, wire
from .effective import subscription_policy
from .models import Attempt, Delivery
from .sender import EXCERPT_BYTES

_pool: ThreadPoolExecutor | None = None
_rng = random.SystemRandom()


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


def apply(delivery: Delivery, decision: decisions.Decision, *, now, attempted: bool) -> dict:
    """Field changes for a delivery after a decision."""
    changes = {"lease_until": None}
    if attempted:
        changes.update(attempt_count=delivery.attempt_count + 1, last_attempt_at=now)
        if delivery.first_attempt_at is None:
            changes["first_attempt_at"] = now
    if decision.action == decisions.SUCCEED:
        changes.update(status=Delivery.Status.SUCCEEDED, delivered_at=now, next_attempt_at=None, finished_at=now)
    elif decision.action == decisions.RETRY:
        changes.update(status=Delivery.Status.PENDING, next_attempt_at=decision.next_attempt_at, queued=False)
    else:
        status = Delivery.Status.DEAD_LETTERED if decision.action == decisions.DEAD_LETTER else Delivery.Status.DROPPED
        changes.update(status=status, dead_letter_reason=decision.reason, next_attempt_at=None, finished_at=now)
    return changes


def hold(delivery: Delivery) -> dict:
    """Not attempted now (subscription paused or unconfirmed, endpoint disabled or frozen): back to pending, parked
    (no due time) until released; the time-to-live still runs (see dispatch.expire_held)."""
    return {"status": Delivery.Status.PENDING, "lease_until": None, "next_attempt_at": None, "queued": False}


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
        updates[delivery.id] = hold(delivery)
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
            updates[delivery.id] = defer(now + timedelta(seconds=max(wait, 0.001)))
    return allowed


def defer(until) -> dict:
    """Not attempted now (throttled): due again at `until`, through the dispatcher. The attempt count stays."""
    return {"status": Delivery.Status.PENDING, "lease_until": None, "next_attempt_at": until, "queued": False}


def record(claimed: list[Delivery], results: list, updates: dict, queue_name: str, probes: set[int]) -> None:
    """Decide after each send, then write attempts, deliveries and endpoint counters in one short transaction."""
    attempts, by_endpoint = [], defaultdict(lambda: {"outcomes": [], "gone": False, "probe": False})
    for (delivery, policy, number, request), result in results:
        started = datetime.fromtimestamp(result.started_at, tz=UTC)
        finished = started + timedelta(milliseconds=result.duration_ms)
        outcome = decisions.Outcome(
            status=result.status, error_class=result.error_class,
            retry_after=decisions.parse_retry_after(result.headers.get("Retry-After"), finished),
        )
        decision = decisions.decide(policy, attempt_number=number - delivery.budget_attempts,
                                    published_at=delivery.budget_start, now=finished, rng=_rng, outcome=outcome)
        updates[delivery.id] = apply(delivery, decision, now=finished, attempted=True)
        attempts.append(Attempt(
            delivery_id=delivery.id, number=number, queue="probe" if delivery.id in probes else queue_name,
            started_at=started, duration_ms=result.duration_ms, request_url=request.url,
            request_headers=request.headers, request_body=request.body[:EXCERPT_BYTES].decode("utf-8", "replace"),
            response_status=result.status, response_headers=result.headers,
            response_body=result.body_excerpt.replace("\x00", ""), error_class=result.error_class,
            error_detail=result.error_detail, outcome=decision.attempt_outcome,
        ))
        endpoint = by_endpoint[delivery.endpoint_id]
        endpoint["outcomes"].append(result.ok)
        endpoint["gone"] |= decision.freeze_endpoint
        endpoint["probe"] |= delivery.id in probes

    with transaction.atomic():
        Attempt.objects.bulk_create(attempts)
        leases.write_back(claimed, updates)
    now = timezone.now()
    for endpoint_id, seen in by_endpoint.items():
        health.record_results(endpoint_id, seen["outcomes"], now, gone=seen["gone"], probe=seen["probe"])
    if any(c.get("status") == Delivery.Status.PENDING and c.get("next_attempt_at") for c in updates.values()):
        from .dispatch import wake_dispatcher

        wake_dispatcher()


def process(delivery_ids: list[int], queue_name: str) -> int:
    """Attempt every claimable delivery in `delivery_ids`; returns how many were sent."""
    now = timezone.now()
    claimed = leases.claim(delivery_ids, now)
    if not claimed:
        return 0
    updates: dict[int, dict] = {}
    to_send = []
    for delivery in claimed:
        policy = subscription_policy(delivery.subscription)
        if delivery.subscription.status != Subscription.Status.CONFIRMED:
            updates[delivery.id] = hold(delivery)
            continue
        expires = policy.max_age_seconds
        if expires is not None and now > delivery.budget_start + timedelta(seconds=expires):
            expired = decisions.give_up(policy, "ttl_expired", "retryable_failure")
            updates[delivery.id] = apply(delivery, expired, now=now, attempted=False)
            continue
        to_send.append((delivery, policy))
    to_send, probes = gated(to_send, updates, now)
    to_send = throttled(to_send, updates, now)
    to_send = [(delivery, policy, delivery.attempt_count + 1,
                wire.build_request(envelope(delivery, policy), attempt_number=delivery.attempt_count + 1,
                                   now=timezone.now()))
               for delivery, policy in to_send]

    futures = [pool().submit(sender.send, request, timeout=policy.timeout_seconds)
               for _, policy, _, request in to_send]
    results = [(item, future.result()) for item, future in zip(to_send, futures, strict=True)]
    record(claimed, results, updates, queue_name, probes)
    return len(to_send)

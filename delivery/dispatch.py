"""The dispatcher and the reconciler: the database holds the schedule, Redis only what is due now.

- dispatch: pending deliveries whose time has come and that are on no queue go to the `retries` queue (or, for
  first attempts that publishing left to it under backlog, to `deliveries`).
- reconcile: expired leases (a worker died mid-send) go back to pending; queued rows whose RQ job no longer exists
  (Redis flushed or restarted) are queued again.
Both are safe to run from several schedulers at once: rows are taken with SKIP LOCKED.
"""

import logging
import time
from datetime import timedelta

import django_rq
from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.db.models.functions import Coalesce
from django.utils import timezone
from rq.job import Job

from subscriptions.models import Subscription

from .effective import subscription_policy
from .fanout import requeue_lost_fan_outs
from .health import schedule_probes
from .models import Delivery
from .queues import DELIVERIES, RETRIES, enqueue_after_commit

log = logging.getLogger(__name__)
WAKE_KEY = "herald:dispatcher:wake"
BATCH = 1000
PRECISE_SLEEP_SECONDS = 0.25


def redis():
    return django_rq.get_connection(RETRIES)


def wake_dispatcher() -> None:
    """Tell a sleeping dispatcher that a retry may now be due sooner than it planned."""
    try:
        with redis().pipeline() as pipe:
            pipe.lpush(WAKE_KEY, 1).ltrim(WAKE_KEY, 0, 0).execute()
    except Exception:  # the dispatcher also wakes by itself every interval
        log.warning("could not wake the dispatcher", exc_info=True)


def dispatch_due(now=None) -> int:
    """Queue every due, unqueued pending delivery: retries on `retries`, first attempts that publishing left to us
    (under backlog) on `deliveries`. Never queues one before its time."""
    now = now or timezone.now()
    total = 0
    while True:
        with transaction.atomic():
            rows = list(
                Delivery.objects.select_for_update(skip_locked=True)
                .filter(status=Delivery.Status.PENDING, queued=False, next_attempt_at__lte=now)
                .order_by("next_attempt_at")
                .values_list("id", "attempt_count")[:BATCH]
            )
            enqueue_after_commit([i for i, attempts in rows if attempts == 0], DELIVERIES)
            enqueue_after_commit([i for i, attempts in rows if attempts > 0], RETRIES)
        total += len(rows)
        if len(rows) < BATCH:
            return total


def next_due_at():
    return (
        Delivery.objects.filter(status=Delivery.Status.PENDING, queued=False, next_attempt_at__isnull=False)
        .aggregate(at=Min("next_attempt_at"))["at"]
    )


def release_expired_leases(now=None) -> int:
    """In-flight rows whose lease ran out: the worker died. Due again now; the attempt may be repeated."""
    now = now or timezone.now()
    with transaction.atomic():
        ids = list(
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(status=Delivery.Status.IN_FLIGHT, lease_until__lt=now)
            .values_list("id", flat=True)[:BATCH]
        )
        Delivery.objects.filter(id__in=ids).update(status=Delivery.Status.PENDING, lease_until=None,
                                                   next_attempt_at=now, queued=False)
    if ids:
        log.warning("released %d deliveries whose lease expired", len(ids))
    return len(ids)


def requeue_lost_jobs(now=None) -> int:
    """Queued rows whose job is gone from Redis (flushed, restarted, or the enqueue failed) are queued again."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.HERALD_RECONCILE_AFTER_SECONDS)
    rows = list(
        Delivery.objects.filter(status=Delivery.Status.PENDING, queued=True, enqueued_at__lt=stale_before)
        .values_list("id", "job_id")[:BATCH * 10]
    )
    if not rows:
        return 0
    connection = redis()
    job_ids = sorted({job_id for _, job_id in rows if job_id})
    with connection.pipeline() as pipe:
        for job_id in job_ids:
            pipe.exists(Job.key_for(job_id))
        alive = {job_id for job_id, exists in zip(job_ids, pipe.execute(), strict=True) if exists}
    lost = [delivery_id for delivery_id, job_id in rows if job_id not in alive]
    if lost:
        Delivery.objects.filter(id__in=lost, status=Delivery.Status.PENDING, queued=True).update(queued=False)
        log.warning("%d queued deliveries had no job in Redis; they go back to the dispatcher", len(lost))
    return len(lost)


def expire_held(now=None) -> int:
    """Held deliveries (paused subscription, disabled or frozen endpoint) keep their time-to-live: past their
    policy's lifetime they are dead-lettered (or dropped) without being sent.

    The lifetime belongs to the subscription's policy, so this is one set-based update per subscription that holds
    deliveries, whatever the backlog."""
    now = now or timezone.now()
    held = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__isnull=True)
    total = 0
    for subscription in Subscription.objects.filter(
            id__in=held.values("subscription_id").distinct()).select_related("topic"):
        policy = subscription_policy(subscription)
        cutoff = now - timedelta(seconds=policy.lifetime_seconds)
        status = Delivery.Status.DEAD_LETTERED if policy.dead_letter else Delivery.Status.DROPPED
        expired = (held.filter(subscription=subscription)
                   .annotate(budget_from=Coalesce("budget_started_at", "message__published_at"))
                   .filter(budget_from__lt=cutoff))
        for reason, frozen in (("endpoint_frozen", True), ("ttl_expired", False)):
            ids = expired.filter(endpoint__state="frozen") if frozen else expired.exclude(endpoint__state="frozen")
            total += Delivery.objects.filter(id__in=ids.values("id"), status=Delivery.Status.PENDING,
                                             next_attempt_at__isnull=True).update(
                status=status, dead_letter_reason=reason, queued=False, finished_at=now)
    return total


def reconcile(now=None) -> dict:
    return {"leases": release_expired_leases(now), "lost_jobs": requeue_lost_jobs(now),
            "lost_fan_outs": requeue_lost_fan_outs(now), "expired_held": expire_held(now),
            "probes": schedule_probes(now)}


def sleep_until_due(max_seconds: float) -> None:
    """Sleep until the next retry is due, a worker wakes us, or `max_seconds` pass, whichever is first.

    Redis times out blocking pops only to about 100 ms (its `hz`), so the last stretch before a due time is a
    plain sleep: that keeps dispatch within a few milliseconds of the schedule.
    """
    due = next_due_at()
    timeout = max_seconds
    if due is not None:
        timeout = min(timeout, max(0.0, (due - timezone.now()).total_seconds()))
    if timeout <= 0:
        return
    if timeout <= PRECISE_SLEEP_SECONDS:
        time.sleep(timeout)
        return
    try:
        redis().blpop([WAKE_KEY], timeout=timeout - PRECISE_SLEEP_SECONDS / 2)
    except Exception:  # Redis unavailable: plain sleep, the next tick retries
        time.sleep(timeout)

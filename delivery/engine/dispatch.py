"""The dispatcher and the reconciler: the database holds the schedule, Redis only what is due now.

- dispatch: pending deliveries whose time has come and that are on no queue go to the `retries` queue (or, for
  first attempts that publishing left to it under backlog, to `deliveries`).
- reconcile: expired leases (a worker died mid-send) count their try and follow the policy; queued rows whose RQ
  job will not run them (Redis flushed or restarted, the job failed or was stopped) are queued again.
Both are safe to run from several schedulers at once: rows are taken with SKIP LOCKED.
"""

import logging
import random
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.db.models.functions import Coalesce
from django.utils import timezone
from rq import Queue
from rq.job import Job, JobStatus
from rq.utils import utcparse

from delivery.engine import transitions
from delivery.engine.effective import subscription_policy, subscription_policy_or_default
from delivery.engine.fanout import requeue_lost_fan_outs
from delivery.engine.health import release_stranded, schedule_probes
from delivery.engine.queues import DELIVERIES, RETRIES, enqueue_after_commit
from delivery.engine.wakeup import WAKE_KEY, redis, wake_dispatcher
from delivery.models import Attempt, Delivery
from delivery.rules import decisions
from delivery.rules.vocabulary import DeadLetterReason
from subscriptions.models import Subscription
from subscriptions.states import EndpointState

log = logging.getLogger(__name__)
_rng = random.SystemRandom()
BATCH = 1000
PRECISE_SLEEP_SECONDS = 0.25


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
    """In-flight rows whose lease ran out: their worker died or stalled mid-try. The try counts, as an attempt with
    the error class `lease_expired` (the request may have reached the endpoint), and the policy decides what
    follows, so retry limits and the time-to-live end a delivery whatever keeps crashing."""
    now = now or timezone.now()
    with transaction.atomic():
        expired = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status=Delivery.Status.IN_FLIGHT, lease_until__lt=now)
            .select_related("message", "subscription__topic", "endpoint")
            .order_by("lease_until")[:BATCH]
        )
        attempts = []
        for delivery in expired:
            decision, attempt = lost_try(delivery, now)
            Delivery.objects.filter(id=delivery.id).update(**transitions.attempted(delivery, decision, now=now))
            attempts.append(attempt)
        Attempt.objects.bulk_create(attempts)
    if expired:
        log.warning("%d deliveries were left in flight by a worker that stopped; their tries are counted",
                    len(expired))
        wake_dispatcher()
    return len(expired)


def lost_try(delivery: Delivery, now) -> tuple[decisions.Decision, Attempt]:
    policy, _ = subscription_policy_or_default(delivery.subscription)
    number = delivery.attempt_count + 1
    error = Attempt.ErrorClass.LEASE_EXPIRED
    decision = decisions.decide(policy, attempt_number=number - delivery.budget_attempts,
                                published_at=delivery.budget_start, now=now, rng=_rng,
                                outcome=decisions.Outcome(status=None, error_class=error))
    attempt = Attempt(
        delivery_id=delivery.id, number=number, started_at=now, duration_ms=0, request_url=delivery.endpoint.url,
        queue=Attempt.Queue.RETRIES if delivery.attempt_count else Attempt.Queue.DELIVERIES, error_class=error,
        error_detail=f"the worker holding this delivery stopped before recording its try (lease ran out at "
                     f"{delivery.lease_until.isoformat()}); the request may have reached the endpoint",
        outcome=decision.attempt_outcome,
    )
    return decision, attempt


def requeue_lost_jobs(now=None) -> int:
    """Queued rows whose job will not run them are queued again: the job is gone (Redis flushed or restarted, or
    the enqueue failed), failed, was stopped or canceled, says `queued` but is on no queue (its worker was killed
    between taking it and starting it), or started long enough ago that it would have claimed the rows (they are
    still pending: it died first, or found them not yet due). Queuing a row twice is harmless: claims are atomic."""
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.HERALD_RECONCILE_AFTER_SECONDS)
    rows = list(
        Delivery.objects.filter(status=Delivery.Status.PENDING, queued=True, enqueued_at__lt=stale_before)
        .order_by("enqueued_at").values_list("id", "job_id")[:BATCH * 10]
    )
    if not rows:
        return 0
    alive = live_jobs({job_id for _, job_id in rows if job_id}, started_before=stale_before)
    lost = [delivery_id for delivery_id, job_id in rows if job_id not in alive]
    if lost:
        Delivery.objects.filter(id__in=lost, status=Delivery.Status.PENDING, queued=True).update(
            **transitions.unqueued())
        log.warning("%d queued deliveries had no job that will run them; they go back to the dispatcher", len(lost))
        wake_dispatcher()
    return len(lost)


def live_jobs(job_ids: set[str], *, started_before) -> set[str]:
    """The jobs among `job_ids` that will still run their rows: waiting on their queue, deferred or scheduled, or
    started after `started_before`."""
    job_ids = sorted(job_ids)
    connection = redis()
    with connection.pipeline() as pipe:
        for job_id in job_ids:
            pipe.hmget(Job.key_for(job_id), "status", "origin", "started_at")
        found = {job_id: [v.decode() if v else "" for v in values]
                 for job_id, values in zip(job_ids, pipe.execute(), strict=True)}
    waiting_on = {origin for status, origin, _ in found.values() if status == JobStatus.QUEUED.value}
    on_queues = {job_id.decode() for origin in waiting_on
                 for job_id in connection.lrange(Queue.redis_queue_namespace_prefix + origin, 0, -1)}
    alive = set()
    for job_id, (status, _, started_at) in found.items():
        if status in (JobStatus.DEFERRED.value, JobStatus.SCHEDULED.value):
            alive.add(job_id)
        elif status == JobStatus.QUEUED.value and job_id in on_queues:
            alive.add(job_id)
        elif status == JobStatus.STARTED.value and started_at and utcparse(started_at) >= started_before:
            alive.add(job_id)
    return alive


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
        for reason, frozen in ((DeadLetterReason.ENDPOINT_FROZEN, True), (DeadLetterReason.TTL_EXPIRED, False)):
            ids = expired.filter(endpoint__state=EndpointState.FROZEN) if frozen else expired.exclude(
                endpoint__state=EndpointState.FROZEN)
            total += Delivery.objects.filter(id__in=ids.values("id"), status=Delivery.Status.PENDING,
                                             next_attempt_at__isnull=True).update(
                **transitions.finished(status, reason, now=now))
    return total


def reconcile(now=None) -> dict:
    """Every repair, each on its own: one that fails (Redis down, say) does not keep the others from running."""
    done = {}
    for name, repair in (("leases", release_expired_leases), ("lost_jobs", requeue_lost_jobs),
                         ("lost_fan_outs", requeue_lost_fan_outs), ("expired_held", expire_held),
                         ("stranded_held", release_stranded), ("probes", schedule_probes)):
        try:
            done[name] = repair(now)
        except Exception:
            log.exception("reconcile: %s failed; the next tick tries again", name)
            done[name] = None
    return done


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

"""The scheduler's ticks (`herald_cron`): dispatch and reconcile. The database holds the schedule; Redis holds only
pumps and wake-ups.

- dispatch: when deliveries are due (a retry's time came, a held row was released, a pump was lost), a pump is
  asked for; pumps take the due rows themselves. Nothing in Redis names a delivery, so a Redis flush or restart
  loses no work: the next tick asks again.
- reconcile: expired leases (a worker died mid-send) count their try and follow the policy; lost fan-outs run again;
  held rows past their time-to-live end; stranded held rows are released; disabled endpoints get their probes;
  an ordering key left without a head (all its deliveries waiting) gets its oldest released.
Both are safe to run from several schedulers at once: rows are taken with SKIP LOCKED.
"""

import logging
import time
from collections import Counter
from datetime import timedelta

from django.db import DatabaseError, transaction
from django.db.models import Min, Q
from django.db.models.functions import Coalesce

from delivery.engine.accounts import confirmation
from delivery.engine.claiming import due_work
from delivery.engine.intake.fanout import requeue_lost_fan_outs
from delivery.engine.plumbing import clock, counters
from delivery.engine.plumbing.queues import DELIVERIES, RETRIES, WAKE_KEY, redis, want_pump
from delivery.engine.sending import journal, recording, spans
from delivery.engine.sending.recording import Tried
from delivery.engine.state import lifecycle, transitions
from delivery.engine.state.effective import subscription_policy_or_default
from delivery.engine.state.health import release_stranded, schedule_probes
from delivery.models import Attempt, Delivery
from delivery.rules import decisions
from delivery.rules.vocabulary import DeadLetterReason, DeliveryStatus
from subscriptions.models import Subscription
from subscriptions.states import EndpointState

log = logging.getLogger(__name__)
BATCH = 1000
# The due rows the scheduler looks at each tick, to know that work is due and whether retries are among it (a look
# at 1,000 read that many rows of a backlog every tick).
DUE_SAMPLE = 64
PRECISE_SLEEP_SECONDS = 0.25


def dispatch_due(now=None) -> int:
    """If deliveries are due, make sure a pump is on its way (on `retries` when retries are among them, else on
    `deliveries`): pumps take due rows from the database themselves, so nothing is queued before its time and a
    lost pump costs nothing. Returns how many are due (at most DUE_SAMPLE counted)."""
    now = now or clock.now()
    due = due_work.due_sample(now, DUE_SAMPLE)
    if due:
        want_pump(RETRIES if any(due) else DELIVERIES)
    elif confirmation.due(now).exists():  # a handshake asked for (or whose sender stopped) and no pump took it
        want_pump(DELIVERIES)
    return len(due)


def next_due_at(now=None):
    """When the next delivery that is not yet due becomes due (what is due already is the pumps' business)."""
    now = now or clock.now()
    return (lifecycle.scheduled(now).aggregate(at=Min("next_attempt_at"))["at"])


def release_expired_leases(now=None) -> int:
    """In-flight rows whose lease ran out: their worker died or stalled mid-try. The try counts, as an attempt with
    the error class `lease_expired` (the request may have reached the endpoint), and the policy decides what
    follows, so retry limits and the time-to-live end a delivery whatever keeps crashing."""
    now = now or clock.now()
    try:
        recovered = record_journaled_answers(now)
    except DatabaseError:
        raise  # the database is failing: the next tick records the answers, then releases the leases
    except Exception:  # whatever an answer holds, it never keeps everyone's expired leases from being released
        log.exception("reconcile: the journaled answers could not be recorded; their leases are released as lost")
        recovered = 0
    with transaction.atomic():
        expired = list(
            lifecycle.lease_expired(now).select_for_update(skip_locked=True, of=("self",))
            .select_related("message", "subscription__topic", "endpoint")
            .order_by("lease_until")[:BATCH]
        )
        attempts, updates = [], {}
        for delivery in expired:
            decision, attempt = lost_try(delivery, now)
            updates[delivery.id] = transitions.attempted(delivery, decision, now=now)
            attempts.append(attempt)
        lifecycle.apply(updates, keyed=[d.id for d in expired if d.ordering_key], now=now)
        Attempt.objects.bulk_create(attempts)
        counters.add_after_commit(Counter(counters.field("attempts", a.outcome, a.error_class or "", a.queue)
                                          for a in attempts))
    if expired:
        spans.lost(attempts, {delivery.id: delivery for delivery in expired})
        log.warning("%d deliveries were left in flight by a worker that stopped; their tries are counted",
                    len(expired))
    return len(expired) + recovered


def record_journaled_answers(now) -> int:
    """Expired leases whose try was answered before its worker stopped: recorded as the attempt it was (from the
    journal), not counted as lost and sent again. Written under the lease, so a race with anyone is harmless."""
    candidates = list(lifecycle.lease_expired(now).select_related("message__topic", "subscription__topic", "endpoint")
                      .order_by("lease_until")[:BATCH])
    found = journal.answered(candidates)
    tries = []
    for delivery in candidates:
        if delivery.id in found:
            number, queue, result = found[delivery.id]
            policy, _ = subscription_policy_or_default(delivery.subscription)
            tries.append(Tried(delivery, policy, number, None, result, queue))
    if tries:
        record_each_alone_if_need_be(tries)
        log.warning("%d deliveries were left in flight by a worker that stopped after they were answered; their "
                    "answers were recorded from the journal", len(tries))
    return len(tries)


def record_each_alone_if_need_be(tries: list[Tried]) -> None:
    """Record the journaled tries together, or one by one if that fails: a try whose answer cannot be recorded is
    dropped from the journal (logged), so that it is counted as lost with its lease instead of being replayed ahead
    of everyone's leases on every tick. A DatabaseError is the database failing (recording already stores a row
    it cannot take without the receiver's answer): it goes up, the entries kept for the next tick."""
    try:
        recording.record([t.delivery for t in tries], tries, {}, set())
    except DatabaseError:
        raise
    except Exception:
        log.exception("reconcile: %d journaled answers could not be recorded together; one by one", len(tries))
        for tried in tries:
            try:
                recording.record([tried.delivery], [tried], {}, set())
            except DatabaseError:
                raise
            except Exception:
                log.exception("reconcile: delivery %s: its journaled answer could not be recorded; dropped, its "
                              "try counts as lost", tried.delivery.id)
    journal.forget([t.delivery.id for t in tries])


def lost_try(delivery: Delivery, now) -> tuple[decisions.Decision, Attempt]:
    policy, _ = subscription_policy_or_default(delivery.subscription)
    number = delivery.attempt_count + 1
    error = Attempt.ErrorClass.LEASE_EXPIRED
    decision = recording.retry_decision(delivery, policy, number, decisions.Answer(status=None, error_class=error),
                                        now)
    attempt = Attempt(
        delivery_id=delivery.id, number=number, started_at=now, duration_ms=0, request_url=delivery.endpoint.url,
        queue=Attempt.Queue.RETRIES if delivery.attempt_count else Attempt.Queue.DELIVERIES, error_class=error,
        error_detail=f"the worker holding this delivery stopped before recording its try (lease ran out at "
                     f"{delivery.lease_until.isoformat()}); the request may have reached the endpoint",
        outcome=decision.attempt_outcome,
    )
    return decision, attempt


def expire_held(now=None) -> int:
    """Held deliveries (paused subscription, disabled or frozen endpoint) keep their time-to-live: past their
    policy's lifetime they are dead-lettered (or dropped) without being sent.

    The lifetime belongs to the subscription's policy, so this is one set-based update per subscription that holds
    deliveries, whatever the backlog."""
    now = now or clock.now()
    total = 0
    for subscription in Subscription.objects.filter(
            id__in=lifecycle.held().values("subscription_id").distinct()).select_related("topic"):
        policy, _ = subscription_policy_or_default(subscription)
        cutoff = now - timedelta(seconds=policy.lifetime_seconds)
        status = DeliveryStatus.DEAD_LETTERED if policy.dead_letter else DeliveryStatus.DROPPED
        expired = (lifecycle.held(subscription=subscription)
                   .annotate(budget_from=Coalesce("budget_started_at", "message__published_at"))
                   .filter(budget_from__lt=cutoff))
        frozen = Q(endpoint__state=EndpointState.FROZEN)
        for reason, rows in ((DeadLetterReason.ENDPOINT_FROZEN, expired.filter(frozen)),
                             (DeadLetterReason.TTL_EXPIRED, expired.exclude(frozen))):
            held = lifecycle.held(id__in=list(rows.values_list("id", flat=True)))
            total += len(lifecycle.end_untried(held, status, reason, now=now))
    return total


def reconcile(now=None) -> dict:
    """Every repair, each on its own: one that fails (Redis down, say) does not keep the others from running."""
    done = {}
    for name, repair in (("leases", release_expired_leases), ("lost_fan_outs", requeue_lost_fan_outs),
                         ("expired_held", expire_held),
                         ("stranded_held", release_stranded), ("probes", schedule_probes),
                         ("ordering_keys", lifecycle.release_stranded_keys)):
        try:
            done[name] = repair(now)
        except Exception:
            log.exception("reconcile: %s failed; the next tick tries again", name)
            done[name] = None
    return done


def sleep_until_due(max_seconds: float, dispatched_at=None) -> None:
    """Sleep until the next retry is due, a worker wakes us, or `max_seconds` pass, whichever is first.

    `dispatched_at`: the time the last `dispatch_due` looked at. What fell due since then has not been dispatched
    yet, so it ends the sleep at once: looking only at rows due after *now* would miss a retry that fell due while
    the tick was busy (its reconcile, a loaded machine) and dispatch it a whole `max_seconds` late.

    Redis times out blocking pops only to about 100 ms (its `hz`), so the last stretch before a due time is a
    plain sleep: that keeps dispatch within a few milliseconds of the schedule.
    """
    due = next_due_at(dispatched_at)
    timeout = max_seconds
    if due is not None:
        timeout = min(timeout, max(0.0, (due - clock.now()).total_seconds()))
    if timeout <= 0:
        return
    if timeout <= PRECISE_SLEEP_SECONDS:
        time.sleep(timeout)
        return
    try:
        redis().blpop([WAKE_KEY], timeout=timeout - PRECISE_SLEEP_SECONDS / 2)
    except Exception:  # Redis unavailable: plain sleep, the next tick retries
        time.sleep(timeout)

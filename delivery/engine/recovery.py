"""Dead letters and recovery: redrive, recover, retry now, pause and resume. Services check state first."""

from django.db import transaction
from django.utils import timezone

from delivery.engine import announce, transitions
from delivery.engine.errors import ApplicationError
from delivery.engine.queues import send_now_after_commit
from delivery.engine.wakeup import wake_dispatcher
from delivery.models import Delivery
from delivery.rules.vocabulary import AttemptQueue
from subscriptions.models import Subscription

BATCH = 1000


def _requeue(queryset) -> int:
    """Give every row of `queryset` a fresh budget, a thousand rows per statement; the dispatcher sends them."""
    now, total = timezone.now(), 0
    while True:
        with transaction.atomic():
            ids = list(queryset.select_for_update(skip_locked=True).values_list("id", flat=True)[:BATCH])
            if ids:
                total += Delivery.objects.filter(id__in=ids).update(**transitions.fresh_budget(now=now))
                transaction.on_commit(wake_dispatcher)
        if len(ids) < BATCH:
            return total


def subscription_redrive(*, subscription: Subscription, since=None, until=None) -> int:
    """Re-queue the subscription's dead letters (dead-lettered within [since, until) if given)."""
    dead = Delivery.objects.filter(subscription=subscription, status=Delivery.Status.DEAD_LETTERED)
    if since:
        dead = dead.filter(finished_at__gte=since)
    if until:
        dead = dead.filter(finished_at__lt=until)
    return _requeue(dead.order_by("id"))


def subscription_recover(*, subscription: Subscription, since) -> int:
    """Resend everything that failed for the subscription since `since`: dead-lettered and dropped deliveries of
    messages published from then on."""
    failed = Delivery.objects.filter(subscription=subscription, message__published_at__gte=since,
                                     status__in=[Delivery.Status.DEAD_LETTERED, Delivery.Status.DROPPED])
    return _requeue(failed.order_by("id"))


def delivery_retry_now(*, delivery: Delivery) -> Delivery:
    """Attempt one delivery now, on the `deliveries` queue; the attempt is recorded as `manual`. A dead letter gets
    a fresh budget. The endpoint's health still applies: a frozen endpoint must be enabled first."""
    retryable = (Delivery.Status.PENDING, Delivery.Status.DEAD_LETTERED, Delivery.Status.DROPPED)
    now = timezone.now()
    with transaction.atomic():
        locked = Delivery.objects.select_for_update().get(id=delivery.id)
        if locked.status not in retryable:
            raise ApplicationError(f"A {locked.status} delivery cannot be retried.", status_code=409)
        changes = transitions.released(now=now)
        if locked.status != Delivery.Status.PENDING:
            changes = transitions.fresh_budget(now=now)
        Delivery.objects.filter(id=locked.id).update(**changes)
        send_now_after_commit([locked.id], AttemptQueue.MANUAL)
    delivery.refresh_from_db()
    return delivery


def delivery_dead_letter(*, delivery: Delivery) -> Delivery:
    """Stop retrying a pending delivery by hand: dead-lettered with reason `manual` (it can be redriven later)."""
    now = timezone.now()
    with transaction.atomic():
        locked = Delivery.objects.select_for_update().get(id=delivery.id)
        if locked.status != Delivery.Status.PENDING:
            raise ApplicationError(f"Only a pending delivery can be dead-lettered; this one is {locked.status}.",
                                   status_code=409)
        Delivery.objects.filter(id=locked.id).update(
            **transitions.finished(Delivery.Status.DEAD_LETTERED, Delivery.DeadLetterReason.MANUAL, now=now))
        announce.deliveries_finished({locked.id: Delivery.Status.DEAD_LETTERED},
                                     keyed=[locked.id] if locked.ordering_key else ())
    delivery.refresh_from_db()
    return delivery


def subscription_pause(*, subscription: Subscription) -> Subscription:
    if subscription.status != Subscription.Status.CONFIRMED:
        raise ApplicationError(f"Only a confirmed subscription can be paused; this one is {subscription.status}.",
                               status_code=409)
    subscription.status = Subscription.Status.PAUSED
    subscription.save(update_fields=["status", "updated_at"])
    return subscription


def subscription_resume(*, subscription: Subscription) -> Subscription:
    """Confirmed again; deliveries held while paused go out at once (endpoint health and throttle still apply)."""
    if subscription.status != Subscription.Status.PAUSED:
        raise ApplicationError("The subscription is not paused.", status_code=409)
    with transaction.atomic():
        subscription.status = Subscription.Status.CONFIRMED
        subscription.save(update_fields=["status", "updated_at"])
        released = Delivery.objects.filter(subscription=subscription, status=Delivery.Status.PENDING,
                                           next_attempt_at__isnull=True).update(
                                               **transitions.released(now=timezone.now()))
        if released:
            transaction.on_commit(wake_dispatcher)
    return subscription

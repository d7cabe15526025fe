"""Dead letters and recovery: redrive, recover, retry now, pause and resume. Services check state first; the
changes of the deliveries' state, and what follows them, are the lifecycle's."""

from django.db import transaction

from delivery.engine.plumbing import clock
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import lifecycle
from delivery.models import Delivery
from delivery.rules.vocabulary import AttemptQueue, DeadLetterReason, DeliveryStatus
from subscriptions.models import Subscription


def subscription_redrive(*, subscription: Subscription, since=None, until=None, now=None) -> int:
    """Re-queue the subscription's dead letters (dead-lettered within [since, until) if given)."""
    if since and until and since >= until:
        raise ApplicationError("must be later than since", field="until")
    dead = Delivery.objects.filter(subscription=subscription, status=DeliveryStatus.DEAD_LETTERED)
    if since:
        dead = dead.filter(finished_at__gte=since)
    if until:
        dead = dead.filter(finished_at__lt=until)
    return lifecycle.new_budget(dead.order_by("id"), now=now or clock.now())


def subscription_recover(*, subscription: Subscription, since, now=None) -> int:
    """Resend everything that failed for the subscription since `since`: dead-lettered and dropped deliveries of
    messages published from then on."""
    failed = Delivery.objects.filter(subscription=subscription, message__published_at__gte=since,
                                     status__in=[DeliveryStatus.DEAD_LETTERED, DeliveryStatus.DROPPED])
    return lifecycle.new_budget(failed.order_by("id"), now=now or clock.now())


def delivery_retry_now(*, delivery: Delivery, now=None) -> Delivery:
    """Attempt one delivery now, on the `deliveries` queue; the attempt is recorded as `manual`. A dead letter gets
    a fresh budget. The endpoint's health still applies: a frozen endpoint must be enabled first."""
    retryable = (DeliveryStatus.PENDING, DeliveryStatus.DEAD_LETTERED, DeliveryStatus.DROPPED)
    with transaction.atomic():
        locked = Delivery.objects.select_for_update().get(id=delivery.id)
        if locked.status not in retryable:
            raise ApplicationError(f"A {locked.status} delivery cannot be retried.", status_code=409)
        lifecycle.retry_now(locked, AttemptQueue.MANUAL, now=now or clock.now())
    delivery.refresh_from_db()
    return delivery


def delivery_dead_letter(*, delivery: Delivery, now=None) -> Delivery:
    """Stop retrying a pending delivery by hand: dead-lettered with reason `manual` (it can be redriven later)."""
    with transaction.atomic():
        locked = Delivery.objects.select_for_update().get(id=delivery.id)
        if locked.status != DeliveryStatus.PENDING:
            raise ApplicationError(f"Only a pending delivery can be dead-lettered; this one is {locked.status}.",
                                   status_code=409)
        lifecycle.end_untried(lifecycle.pending(id=locked.id), DeliveryStatus.DEAD_LETTERED,
                              DeadLetterReason.MANUAL, now=now or clock.now())
    delivery.refresh_from_db()
    return delivery


def subscription_pause(*, subscription: Subscription) -> Subscription:
    if subscription.status != Subscription.Status.CONFIRMED:
        raise ApplicationError(f"Only a confirmed subscription can be paused; this one is {subscription.status}.",
                               status_code=409)
    subscription.status = Subscription.Status.PAUSED
    subscription.save(update_fields=["status", "updated_at"])
    return subscription


def subscription_resume(*, subscription: Subscription, now=None) -> Subscription:
    """Confirmed again; deliveries held while paused go out at once (endpoint health and throttle still apply)."""
    if subscription.status != Subscription.Status.PAUSED:
        raise ApplicationError("The subscription is not paused.", status_code=409)
    with transaction.atomic():
        subscription.status = Subscription.Status.CONFIRMED
        subscription.save(update_fields=["status", "updated_at"])
        lifecycle.release(now=now or clock.now(), subscription=subscription)
    return subscription

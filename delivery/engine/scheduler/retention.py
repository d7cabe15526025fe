"""Purging old attempts, finished deliveries and messages past their topic's retention, in small batches (short
locks only)."""

from datetime import timedelta

from delivery.conf import herald
from delivery.engine.plumbing import clock
from delivery.models import Attempt, Delivery, Exchange, Message
from delivery.rules.vocabulary import TERMINAL
from subscriptions.models import Topic

BATCH = 1000


def _purge_in_batches(queryset) -> int:
    total = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:BATCH])
        if not ids:
            return total
        queryset.model.objects.filter(pk__in=ids).delete()
        total += len(ids)


def purge(now=None) -> dict:
    """Attempts past HERALD_ATTEMPT_RETENTION_DAYS; finished deliveries and messages past their topic's retention
    (`Topic.message_retention_days`, else HERALD_MESSAGE_RETENTION_DAYS). A message is kept while any of its
    deliveries is unfinished. One pass per distinct retention, so the cost follows the rows purged."""
    now = now or clock.now()
    attempt_cutoff = now - timedelta(days=herald.ATTEMPT_RETENTION_DAYS)
    attempts = _purge_in_batches(Attempt.objects.filter(started_at__lt=attempt_cutoff))
    deliveries = messages = 0
    for days in Topic.objects.values_list("message_retention_days", flat=True).distinct():
        cutoff = now - timedelta(days=days or herald.MESSAGE_RETENTION_DAYS)
        topics = Topic.objects.filter(message_retention_days=days) if days else Topic.objects.filter(
            message_retention_days__isnull=True)
        deliveries += _purge_in_batches(Delivery.objects.filter(
            status__in=TERMINAL, finished_at__lt=cutoff, message__topic__in=topics))
        messages += _purge_in_batches(Message.objects.filter(
            topic__in=topics, published_at__lt=cutoff, deliveries__isnull=True))
    # A batch's exchange goes with the last of its attempts (attempts and deliveries are purged in ranges).
    exchanges = _purge_in_batches(Exchange.objects.filter(attempts__isnull=True))
    return {"attempts": attempts, "deliveries": deliveries, "messages": messages, "exchanges": exchanges}

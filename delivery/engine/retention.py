"""Purging old terminal deliveries, attempts and messages in small batches (short locks only)."""

from datetime import timedelta

from django.utils import timezone

from delivery.conf import herald
from delivery.models import Attempt, Delivery, Message

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
    now = now or timezone.now()
    attempt_cutoff = now - timedelta(days=herald.ATTEMPT_RETENTION_DAYS)
    message_cutoff = now - timedelta(days=herald.MESSAGE_RETENTION_DAYS)
    attempts = _purge_in_batches(Attempt.objects.filter(started_at__lt=attempt_cutoff))
    deliveries = _purge_in_batches(
        Delivery.objects.filter(status__in=Delivery.TERMINAL, finished_at__lt=message_cutoff)
    )
    messages = _purge_in_batches(
        Message.objects.filter(published_at__lt=message_cutoff, deliveries__isnull=True)
    )
    return {"attempts": attempts, "deliveries": deliveries, "messages": messages}

"""Publishing: store the message and its deliveries in one transaction (or, for a large topic, hand the deliveries
to a fan-out job), and ask for a pump after commit."""

import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from delivery.engine import fanout
from delivery.engine.errors import ApplicationError
from delivery.engine.queues import pump_after_commit
from delivery.models import Delivery, Message
from subscriptions.models import Topic

IDEMPOTENCY_WINDOW = timedelta(hours=24)


def fingerprint(**parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def message_publish(
    *,
    topic: Topic,
    payload,
    payload_is_text: bool = False,
    event_type: str = "herald.message",
    subject: str = "",
    attributes: dict | None = None,
    idempotency_key: str | None = None,
) -> tuple[Message, int, bool]:
    """Returns (message, deliveries created, created). A repeated idempotency key returns the original message."""
    attributes = attributes or {}
    digest = fingerprint(payload=payload, text=payload_is_text, type=event_type, subject=subject, attrs=attributes)
    if idempotency_key:
        existing = Message.objects.filter(topic=topic, idempotency_key=idempotency_key).first()
        if existing is not None and existing.published_at > timezone.now() - IDEMPOTENCY_WINDOW:
            return _replay(existing, digest)
        if existing is not None:  # the key's 24 hours are over: it may name a new message now
            Message.objects.filter(id=existing.id).update(idempotency_key=None)
    try:
        with transaction.atomic():
            chosen = fanout.targets(topic.id, attributes)
            large = len(chosen) > settings.HERALD_INLINE_FANOUT
            message = Message.objects.create(
                topic=topic, payload=payload, payload_is_text=payload_is_text, event_type=event_type,
                subject=subject, attributes=attributes, published_at=timezone.now(),
                idempotency_key=idempotency_key or None, request_fingerprint=digest, fanout_pending=large,
            )
            if large:  # answer now; a job writes the deliveries
                transaction.on_commit(lambda: fanout.enqueue_fan_out(message.id))
                return message, len(chosen), True
            deliveries = Delivery.objects.bulk_create(fanout.build(message, chosen), batch_size=1000)
            if any(d.next_attempt_at is not None for d in deliveries):
                pump_after_commit()
    except IntegrityError:
        if not idempotency_key:
            raise
        existing = Message.objects.get(topic=topic, idempotency_key=idempotency_key)  # lost a race: same answer
        return _replay(existing, digest)
    return message, len(deliveries), True


def _replay(existing: Message, digest: str):
    if existing.request_fingerprint != digest:
        raise ApplicationError("This Idempotency-Key was already used with a different request.", status_code=409)
    pending = existing.fanout_pending
    count = len(fanout.targets(existing.topic_id, existing.attributes)) if pending else existing.deliveries.count()
    return existing, count, False

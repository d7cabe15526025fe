"""Publishing: store the message and its deliveries in one transaction (or, for a large topic, hand the deliveries
to a fan-out job), and ask for a pump after commit."""

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from delivery.conf import herald
from delivery.engine import fanout
from delivery.engine.errors import ApplicationError
from delivery.engine.queues import pump_after_commit
from delivery.models import Delivery, Message
from subscriptions.models import Topic

IDEMPOTENCY_WINDOW = timedelta(hours=24)
# Callables told of each new message as it is written: (message, number of deliveries). delivery.testing's outbox
# is one; empty in production.
OBSERVERS: list = []


def _observe(message: Message, deliveries: int) -> None:
    for observer in OBSERVERS:
        observer(message, deliveries)


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
    ordering_key: str | None = None,
) -> tuple[Message, int, bool]:
    """Returns (message, deliveries created, created). A repeated idempotency key returns the original message."""
    attributes = attributes or {}
    digest = fingerprint(payload=payload, text=payload_is_text, type=event_type, subject=subject, attrs=attributes,
                         **({"ordering_key": ordering_key} if ordering_key else {}))
    if idempotency_key:
        existing = Message.objects.filter(topic=topic, idempotency_key=idempotency_key).first()
        if existing is not None and existing.published_at > timezone.now() - IDEMPOTENCY_WINDOW:
            return _replay(existing, digest)
        if existing is not None:  # the key's 24 hours are over: it may name a new message now
            Message.objects.filter(id=existing.id).update(idempotency_key=None)
    try:
        with transaction.atomic():
            facts = fanout.Facts(attributes, event_type, payload, payload_is_text)
            chosen, skipped = fanout.decide(fanout.topic_subscriptions(topic.id), facts)
            large = len(chosen) > herald.INLINE_FANOUT
            waiting = set() if large else fanout.ordered_waiting(topic.id, ordering_key, chosen)
            message = Message.objects.create(
                topic=topic, payload=payload, payload_is_text=payload_is_text, event_type=event_type,
                subject=subject, attributes=attributes, published_at=timezone.now(),
                idempotency_key=idempotency_key or None, request_fingerprint=digest, fanout_pending=large,
                fanout_skipped=skipped, ordering_key=ordering_key or None,
            )
            _observe(message, len(chosen))
            if large:  # answer now; a job writes the deliveries
                transaction.on_commit(lambda: fanout.enqueue_fan_out(message.id))
                return message, len(chosen), True
            deliveries = Delivery.objects.bulk_create(fanout.build(message, chosen, waiting), batch_size=1000)
            if any(d.next_attempt_at is not None for d in deliveries):
                pump_after_commit()
    except IntegrityError:
        if not idempotency_key:
            raise
        existing = Message.objects.get(topic=topic, idempotency_key=idempotency_key)  # lost a race: same answer
        return _replay(existing, digest)
    return message, len(deliveries), True


@dataclass(frozen=True)
class Entry:
    """One message of a batch publish."""

    payload: object
    payload_is_text: bool = False
    event_type: str = "herald.message"
    subject: str = ""
    attributes: dict = field(default_factory=dict)
    idempotency_key: str | None = None
    ordering_key: str | None = None


def message_publish_batch(*, topic: Topic, entries: list[Entry]) -> list[tuple[Message, int, bool] | ApplicationError]:
    """Publish several messages to one topic, in order; returns (message, deliveries, created) for each, or the
    ApplicationError of an entry that could not be published (an idempotency key used with another request; the
    others are published all the same).

    Entries without an idempotency key cost one transaction together: the topic's subscriptions read once, the
    messages and their deliveries written with two bulk inserts, one pump asked for. An entry with a key is
    published on its own (its key is checked as `message_publish` does); when such entries and ordering keys mix,
    every entry is published on its own, in order, so the ordering keys keep the batch's order."""
    results: dict[int, tuple[Message, int, bool]] = {}
    in_order = any(e.ordering_key for e in entries) and any(e.idempotency_key for e in entries)
    plain = [] if in_order else [(n, entry) for n, entry in enumerate(entries) if not entry.idempotency_key]
    if plain:
        with transaction.atomic():
            subscriptions = fanout.topic_subscriptions(topic.id)
            now = timezone.now()
            messages, chosen_for, waiting_for = [], [], []
            keyed: dict[str, set[int]] = {}  # ordering key → ordered subscriptions given a delivery in this batch
            for _, entry in plain:
                chosen, skipped = fanout.decide(subscriptions, fanout.Facts(
                    entry.attributes, entry.event_type, entry.payload, entry.payload_is_text))
                large = len(chosen) > herald.INLINE_FANOUT
                key = entry.ordering_key
                waiting = set() if large else fanout.ordered_waiting(topic.id, key, chosen, keyed.get(key, set()))
                if key and not large:
                    keyed.setdefault(key, set()).update(c.id for c in chosen if c.ordered)
                messages.append(Message(
                    topic=topic, payload=entry.payload, payload_is_text=entry.payload_is_text,
                    event_type=entry.event_type, subject=entry.subject, attributes=entry.attributes,
                    published_at=now, request_fingerprint=fingerprint(
                        payload=entry.payload, text=entry.payload_is_text, type=entry.event_type,
                        subject=entry.subject, attrs=entry.attributes,
                        **({"ordering_key": key} if key else {})), fanout_pending=large,
                    fanout_skipped=skipped, ordering_key=key or None))
                chosen_for.append(chosen)
                waiting_for.append(waiting)
            Message.objects.bulk_create(messages)
            for message, chosen in zip(messages, chosen_for, strict=True):
                _observe(message, len(chosen))
            deliveries = []
            for message, chosen, waiting in zip(messages, chosen_for, waiting_for, strict=True):
                if message.fanout_pending:
                    transaction.on_commit(lambda message_id=message.id: fanout.enqueue_fan_out(message_id))
                else:
                    deliveries += fanout.build(message, chosen, waiting)
            Delivery.objects.bulk_create(deliveries, batch_size=1000)
            if any(d.next_attempt_at is not None for d in deliveries):
                pump_after_commit()
        for (n, _), message, chosen in zip(plain, messages, chosen_for, strict=True):
            results[n] = (message, len(chosen), True)
    for n, entry in enumerate(entries):
        if n not in results:  # with an idempotency key (or all, in order, when keys and ordering keys mix)
            try:
                results[n] = message_publish(
                    topic=topic, payload=entry.payload, payload_is_text=entry.payload_is_text,
                    event_type=entry.event_type, subject=entry.subject, attributes=entry.attributes,
                    idempotency_key=entry.idempotency_key, ordering_key=entry.ordering_key)
            except ApplicationError as exc:  # its key was used with another request: this entry fails alone
                results[n] = exc
    return [results[n] for n in range(len(entries))]


def _replay(existing: Message, digest: str):
    if existing.request_fingerprint != digest:
        raise ApplicationError("This Idempotency-Key was already used with a different request.", status_code=409)
    pending = existing.fanout_pending
    count = len(fanout.targets(existing)) if pending else existing.deliveries.filter(replay=None).count()
    return existing, count, False

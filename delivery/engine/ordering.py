"""Ordered delivery per key: a subscription with `ordered_delivery` receives the messages of one `ordering_key` one
at a time, in publish order, each after the previous one finished (succeeded, or was dead-lettered or dropped as
its policy decides).

Only the oldest unfinished delivery of a (subscription, key) is `pending`; the ones behind it are `waiting` and
invisible to the pumps. When a delivery finishes, the writer that finished it releases the next one in the same
transaction (`release_next`), so a crash between the two is impossible: a worker killed mid-send leaves the head
`in_flight` until its lease expires and the reconciler counts the try, as for any delivery, and the key's order
holds. Nothing of it lives in Redis. Publishing and releasing take the same advisory lock per (topic, key), so a
message published while its predecessor finishes is either released by the finisher or published as `pending`;
`release_stranded` in the reconciler is the safety net if a path ever left a key without a head.

Different keys are independent rows: a failing key retries (or waits for its endpoint) without holding back any
other key, and deliveries without a key, or of subscriptions without ordering, never touch any of this.
"""

import zlib

from django.db import connection, transaction
from django.db.models import Min
from django.utils import timezone

from delivery.engine.queues import DELIVERIES, pump_after_commit, want_pump
from delivery.models import Delivery
from delivery.rules.vocabulary import DeliveryStatus

ACTIVE = (DeliveryStatus.PENDING, DeliveryStatus.IN_FLIGHT)  # a key with one of these has its head


def lock(pairs) -> None:
    """Take the transaction-scoped advisory lock of each (topic id, ordering key), in one order (no deadlocks)."""
    if connection.vendor != "postgresql":  # SQLite serializes writers
        return
    keys = sorted({(topic_id % 2_147_483_647, zlib.crc32(key.encode()) - 2_147_483_648) for topic_id, key in pairs})
    if keys:
        with connection.cursor() as cursor:
            for topic_key, key_hash in keys:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [topic_key, key_hash])


def busy(subscription_ids, key: str) -> set[int]:
    """The subscriptions among `subscription_ids` that have an unfinished delivery of `key` (so a new one waits)."""
    if not subscription_ids:
        return set()
    return set(Delivery.objects.filter(subscription_id__in=subscription_ids, ordering_key=key,
                                       status__in=(*ACTIVE, DeliveryStatus.WAITING))
               .values_list("subscription_id", flat=True).distinct())


def release_next(finished_ids) -> int:
    """Inside the transaction that finished `finished_ids` (deliveries with an ordering key): make the next waiting
    delivery of each of their keys pending and due now, unless the key still has a pending or in-flight one (a
    redriven older message). Returns how many were released."""
    keys = list(Delivery.objects.filter(id__in=finished_ids, ordering_key__isnull=False)
                .values_list("subscription__topic_id", "subscription_id", "ordering_key").distinct())
    if not keys:
        return 0
    lock((topic_id, key) for topic_id, _, key in keys)
    released = sum(_release(subscription_id, key) for _, subscription_id, key in keys)
    if released:
        pump_after_commit()
    return released


def _release(subscription_id: int, key: str) -> int:
    rows = Delivery.objects.filter(subscription_id=subscription_id, ordering_key=key)
    if rows.filter(status__in=ACTIVE).exists():
        return 0
    head = rows.filter(status=DeliveryStatus.WAITING).aggregate(first=Min("id"))["first"]
    if head is None:
        return 0
    return rows.filter(id=head, status=DeliveryStatus.WAITING).update(status=DeliveryStatus.PENDING,
                                                                      next_attempt_at=timezone.now())


def release_stranded(now=None, limit: int = 1000) -> int:
    """The reconciler's safety net: keys whose deliveries all wait (none pending or in flight) get their oldest
    released. Reads only waiting rows (a partial index holds the unfinished keyed ones)."""
    return release_heads(None, limit)


def release_heads(subscription_id: int | None, limit: int = 1000) -> int:
    """Each key (of one subscription, or of all) whose deliveries all wait gets its oldest released, each under its
    key's lock (a replay's keyed deliveries are written waiting, then released by this)."""
    waiting = Delivery.objects.filter(status=DeliveryStatus.WAITING)
    if subscription_id is not None:
        waiting = waiting.filter(subscription_id=subscription_id)
    keys = list(waiting.values_list("subscription__topic_id", "subscription_id", "ordering_key").distinct()[:limit])
    released = 0
    for topic_id, subscription_id, key in keys:
        with transaction.atomic():
            lock([(topic_id, key)])
            released += _release(subscription_id, key)
    if released:
        want_pump(DELIVERIES)
    return released


def release_all(subscription_id: int) -> int:
    """Ordering turned off: every waiting delivery of the subscription is due now."""
    released = Delivery.objects.filter(subscription_id=subscription_id, status=DeliveryStatus.WAITING).update(
        status=DeliveryStatus.PENDING, next_attempt_at=timezone.now())
    if released:
        pump_after_commit()
    return released

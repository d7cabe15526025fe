"""Ordered delivery per key: a subscription with `ordered_delivery` receives the messages of one `ordering_key` one
at a time, in publish order, each after the previous one finished (succeeded, or was dead-lettered or dropped as
its policy decides).

Only the oldest unfinished delivery of a (subscription, key) is `pending`; the ones behind it are `waiting` and
invisible to the pumps. When a delivery finishes, the door that finished it (`lifecycle.settled`,
`lifecycle.end_untried`) releases the next one in the same transaction, so a crash between the two is impossible: a
worker killed mid-send leaves the head `in_flight` until its lease expires and the reconciler counts the try, as for
any delivery, and the key's order holds. Nothing of it lives in Redis. Publishing and releasing take the same
advisory lock per (topic, key), so a message published while its predecessor finishes is either released by the
finisher or published as `pending`; `lifecycle.release_stranded_keys` in the reconciler is the safety net if a path
ever left a key without a head.

Different keys are independent rows: a failing key retries (or waits for its endpoint) without holding back any
other key, and deliveries without a key, or of subscriptions without ordering, never touch any of this.

This module only reads and locks; every change of state, and the spelling of `waiting`, is the lifecycle's.
"""

import zlib

from django.db import connection

from delivery.models import Delivery
from delivery.rules.vocabulary import UNFINISHED


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
                                       status__in=UNFINISHED).values_list("subscription_id", flat=True).distinct())


def keys_of(delivery_ids) -> list[tuple[int, int, str]]:
    """(topic id, subscription id, key) of each distinct ordering key among `delivery_ids`."""
    return list(Delivery.objects.filter(id__in=delivery_ids, ordering_key__isnull=False)
                .values_list("subscription__topic_id", "subscription_id", "ordering_key").distinct())

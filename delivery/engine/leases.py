"""Leases on delivery rows: claim due rows for a worker, and write results back only while the lease is ours.

Claiming is atomic (pending and due → in_flight with a lease), so a duplicate job finds nothing to do, and a job
whose lease expired (it was too slow, or its worker died and the reconciler moved the row on) changes nothing.
"""

from collections import Counter
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q

from delivery.conf import herald
from delivery.engine import lifecycle, transitions
from delivery.engine.effective import subscription_policy
from delivery.models import Delivery
from delivery.rules.vocabulary import DeliveryStatus


def claim(delivery_ids: list[int], now) -> list[Delivery]:
    """Take the due, pending rows among `delivery_ids` (a manual retry, a test); rows another job holds are
    skipped, not waited for."""
    return _claim(lifecycle.due(now, id__in=delivery_ids), now)


def claim_due(now, limit: int, *, per_endpoint: int, in_flight: Counter | None = None) -> tuple[list[Delivery], bool]:
    """Take up to `limit` requests' worth of due rows, oldest due first, and no more of one endpoint than its room
    (`per_endpoint` requests less what it has `in_flight`), so a backlog for one endpoint never fills a batch;
    endpoints without room are not read at all. A row of a batching subscription is a 1/max_events_per_batch share
    of a request, and such a subscription gets up to a whole batch of its due rows. Rows another worker is taking
    are skipped. Returns (claimed, whether more was due than taken). The due-work query reads the partial index on
    `next_attempt_at` of pending rows: its cost follows the batch, not the number of pending rows."""
    in_flight = in_flight or Counter()
    full = [endpoint_id for endpoint_id, count in in_flight.items() if count >= per_endpoint]
    due = list(lifecycle.due(now).exclude(endpoint_id__in=full).order_by("next_attempt_at")
               .values_list("id", "endpoint_id", "subscription_id", "subscription__max_events_per_batch")
               [:limit * 4])
    taken: Counter = Counter()
    ids, batching, used = [], {}, 0.0
    for delivery_id, endpoint_id, subscription_id, batch in due:
        weight = 1 / batch
        if taken[endpoint_id] + in_flight[endpoint_id] + weight <= per_endpoint + 1e-9:
            taken[endpoint_id] += weight
            ids.append(delivery_id)
            used += weight
            if batch > 1:
                batching[subscription_id] = batch
            if used >= limit:
                break
    more = len(due) > len(ids) or len(due) == limit * 4
    for subscription_id, batch in batching.items():  # fill a whole batch
        extra = list(lifecycle.due(now, subscription_id=subscription_id).exclude(id__in=ids)
                     .order_by("next_attempt_at").values_list("id", flat=True)[:batch])
        ids += extra
        more = more or len(extra) == batch
    if not ids:
        return [], more
    return _claim(Delivery.objects.filter(id__in=ids), now), more


def _claim(candidates, now) -> list[Delivery]:
    """Two round trips on PostgreSQL: load the candidates, then one UPDATE ... RETURNING (SKIP LOCKED). The lease
    covers the wait for a send slot (HERALD_SEND_START_WINDOW_SECONDS), the longest timeout among them and a margin."""
    candidates = list(candidates.select_related("message__topic", "subscription__topic", "endpoint"))
    if not candidates:
        return []
    longest = max(subscription_policy(d.subscription).timeout_seconds for d in candidates)
    window, margin = herald.SEND_START_WINDOW_SECONDS, herald.LEASE_MARGIN_SECONDS
    lease = now + timedelta(seconds=window + longest + margin)
    locked = _lease([d.id for d in candidates], now, lease)
    claimed = sorted((d for d in candidates if d.id in locked), key=lambda d: d.id)
    for delivery in claimed:
        for name, value in transitions.claimed(lease=lease).items():
            setattr(delivery, name, value)
    return claimed


def _lease(ids: list[int], now, lease) -> set[int]:
    """Flip the still-pending, due rows among `ids` to in_flight with `lease`; returns the ids this call won."""
    pending, due, changes = DeliveryStatus.PENDING, Q(next_attempt_at__lte=now), transitions.claimed(lease=lease)
    if connection.vendor == "postgresql":  # one round trip
        table = Delivery._meta.db_table
        assignments = ", ".join(f"{Delivery._meta.get_field(name).column} = %s" for name in changes)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""UPDATE {table} SET {assignments}
                    WHERE id IN (SELECT id FROM {table} WHERE id = ANY(%s) AND status = %s AND next_attempt_at <= %s
                                 FOR UPDATE SKIP LOCKED)
                    RETURNING id""",
                [*changes.values(), ids, pending, now],
            )
            return {row[0] for row in cursor.fetchall()}
    with transaction.atomic():  # SQLite (local runs): writers are serialized, no row locks needed
        won = set(Delivery.objects.filter(due, id__in=ids, status=pending).values_list("id", flat=True))
        Delivery.objects.filter(id__in=won).update(**changes)
    return won


def write_back(claimed: list[Delivery], updates: dict) -> set[int]:
    """Apply each delivery's changes, only to rows whose lease is still the one this job took (a row whose lease
    expired may have moved on; it is left be). Returns the ids written. One statement on PostgreSQL; runs in the
    caller's transaction. What follows the changes (`lifecycle.settled`) is the caller's to ask for."""
    leases = {d.id: d.lease_until for d in claimed}
    updates = {delivery_id: changes for delivery_id, changes in updates.items() if delivery_id in leases}
    if not updates:
        return set()
    if connection.vendor != "postgresql":
        return {delivery_id for delivery_id, changes in updates.items()
                if lifecycle.in_flight(id=delivery_id, lease_until=leases[delivery_id]).update(**changes)}
    names = sorted({name for changes in updates.values() for name in changes})
    fields = [Delivery._meta.get_field(name) for name in names]
    by_id = {d.id: d for d in claimed}
    rows, params = [], []
    for delivery_id, changes in updates.items():
        current = by_id[delivery_id]
        values = [changes[f.name] if f.name in changes else getattr(current, f.attname) for f in fields]
        rows.append("(" + ", ".join(["%s::bigint", "%s::timestamptz"] + [f"%s::{f.db_type(connection)}"
                                                                           for f in fields]) + ")")
        params += [delivery_id, leases[delivery_id]] + [f.get_db_prep_save(v, connection)
                                                        for f, v in zip(fields, values, strict=True)]
    table = Delivery._meta.db_table
    assignments = ", ".join(f"{f.column} = v.{f.column}" for f in fields)
    columns = ", ".join(["id", "lease"] + [f.column for f in fields])
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS d SET {assignments} FROM (VALUES {', '.join(rows)}) AS v({columns}) "
            f"WHERE d.id = v.id AND d.status = %s AND d.lease_until = v.lease RETURNING d.id",
            params + [DeliveryStatus.IN_FLIGHT],
        )
        return {row[0] for row in cursor.fetchall()}

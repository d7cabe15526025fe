"""Leases on delivery rows: claim due rows for one job, and write results back only while the lease is ours.

Claiming is atomic (pending and due → in_flight with a lease), so a duplicate job finds nothing to do, and a job
whose lease expired (it was too slow, or its worker died and the reconciler moved the row on) changes nothing.
"""

import math
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from delivery.engine import transitions
from delivery.engine.effective import subscription_policy
from delivery.models import Delivery


def claim(delivery_ids: list[int], now) -> list[Delivery]:
    """Take the due, pending rows among `delivery_ids`; rows another job holds are skipped, not waited for.

    Two round trips on PostgreSQL: load the candidates, then one UPDATE ... RETURNING (SKIP LOCKED).
    """
    candidates = list(
        Delivery.objects.filter(id__in=delivery_ids, status=Delivery.Status.PENDING, next_attempt_at__lte=now)
        .select_related("message__topic", "subscription__topic", "endpoint")
    )
    if not candidates:
        return []
    rounds = math.ceil(len(candidates) / settings.HERALD_SENDER_THREADS)
    longest = max(subscription_policy(d.subscription).timeout_seconds for d in candidates)
    lease = now + timedelta(seconds=rounds * longest + settings.HERALD_LEASE_MARGIN_SECONDS)
    locked = _lease([d.id for d in candidates], now, lease)
    claimed = sorted((d for d in candidates if d.id in locked), key=lambda d: d.id)
    for delivery in claimed:
        for name, value in transitions.claimed(lease=lease).items():
            setattr(delivery, name, value)
    return claimed


def _lease(ids: list[int], now, lease) -> set[int]:
    """Flip the still-pending, due rows among `ids` to in_flight with `lease`; returns the ids this call won."""
    pending, due, changes = Delivery.Status.PENDING, Q(next_attempt_at__lte=now), transitions.claimed(lease=lease)
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
    caller's transaction."""
    leases = {d.id: d.lease_until for d in claimed}
    updates = {delivery_id: changes for delivery_id, changes in updates.items() if delivery_id in leases}
    if not updates:
        return set()
    if connection.vendor != "postgresql":
        return {delivery_id for delivery_id, changes in updates.items()
                if Delivery.objects.filter(id=delivery_id, status=Delivery.Status.IN_FLIGHT,
                                           lease_until=leases[delivery_id]).update(**changes)}
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
            params + [Delivery.Status.IN_FLIGHT],
        )
        return {row[0] for row in cursor.fetchall()}

"""Leases on delivery rows: claim due rows for a worker, and write results back only while the lease is ours.

Claiming is atomic (pending and due → in_flight with a lease), so a duplicate job finds nothing to do, and a job
whose lease expired (it was too slow, or its worker died and the reconciler moved the row on) changes nothing.
"""

import itertools
from collections import Counter
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q

from delivery.conf import herald
from delivery.engine import lifecycle, transitions
from delivery.engine.effective import subscription_policy
from delivery.models import Delivery, Message
from delivery.rules.vocabulary import DeliveryStatus
from subscriptions.models import Endpoint, Subscription


def claim(delivery_ids: list[int], now) -> list[Delivery]:
    """Take the due, pending rows among `delivery_ids` (a manual retry, a test); rows another job holds are
    skipped, not waited for."""
    due = dict(lifecycle.due(now, id__in=delivery_ids).values_list("id", "subscription_id"))
    return _claim(list(due), set(due.values()), now)


SHARES_PER_CLAIM = 256  # (owner, tenant) shares with due work looked at by one claim, in turn after the last one
_after_share = (0, 0)  # where the next claim's look at shares starts (per process; a fairness cursor, not a lock)
OWN = 0  # the tenant of an owner's own rows, in a share


def claim_due(now, limit: int, *, per_endpoint: int, in_flight: Counter | None = None) -> tuple[list[Delivery], bool]:
    """Take up to `limit` requests' worth of due rows, shared fairly: across the owners with due work in turn,
    within an owner across its tenants (and its own rows) in turn, and within those across endpoints in turn, each
    one's oldest due first, so a quiet owner's (or tenant's) fresh delivery goes out with the next claim whatever
    another's backlog, while a busy owner alone still gets every free slot. No endpoint gets more than its room
    (`per_endpoint` requests less what it has `in_flight`); endpoints without room are not read at all. A row of a
    batching subscription is a 1/max_events_per_batch share of a request, and such a subscription gets up to a
    whole batch of its due rows. Rows another worker is taking are skipped. Returns (claimed, whether more was due
    than taken). Both queries read partial indexes of pending rows (docs/architecture.md, "Fair claiming"): their
    cost follows the batch and the shares with due work, not the number of pending rows."""
    in_flight = in_flight or Counter()
    full = [endpoint_id for endpoint_id, count in in_flight.items() if count >= per_endpoint]
    due, more = due_in_turn(now, limit * 4, full)
    taken: Counter = Counter()
    ids, batching, used, subscriptions = [], {}, 0.0, set()
    for delivery_id, endpoint_id, subscription_id, batch in due:
        weight = 1 / batch
        if taken[endpoint_id] + in_flight[endpoint_id] + weight <= per_endpoint + 1e-9:
            taken[endpoint_id] += weight
            ids.append(delivery_id)
            subscriptions.add(subscription_id)
            used += weight
            if batch > 1:
                batching[subscription_id] = batch
            if used >= limit:
                break
    # Endpoints without room were not read: their due rows wait for the sends in flight, and the pump must look
    # again when those complete rather than take "nothing read" for "nothing due".
    more = more or len(due) > len(ids) or bool(full)
    for subscription_id, batch in batching.items():  # fill a whole batch
        extra = list(lifecycle.due(now, subscription_id=subscription_id).exclude(id__in=ids)
                     .order_by("next_attempt_at").values_list("id", flat=True)[:batch])
        ids += extra
        more = more or len(extra) == batch
    if not ids:
        return [], more
    return _claim(ids, subscriptions, now), more


def due_in_turn(now, count: int, full: list[int]) -> tuple[list[tuple], bool]:
    """Up to about `count` due rows (id, endpoint, subscription, batch size), in the order a fair claim takes
    them: owners in turn, each owner's tenants in turn, and their endpoints in turn, each one's rows oldest first.
    Also whether more was due than read."""
    if connection.vendor != "postgresql":  # SQLite (local runs): one owner in practice; oldest first
        rows = list(lifecycle.due(now).exclude(endpoint_id__in=full).order_by("next_attempt_at")
                    .values_list("id", "endpoint_id", "subscription_id", "subscription__max_events_per_batch",
                                 "owner_id", "tenant_id")[:count])
        return in_turn(rows), len(rows) == count
    shares = shares_with_due_work(now)
    if not shares:
        return [], False
    quotas = share_quotas(shares, count)
    # The row comparison is the share index's own range (owner, tenant, next_attempt_at): with it the planner reads
    # each share's oldest due rows there, never the due-time index filtered by owner (which, beside one owner's
    # million due rows, would read them all to find another owner's one).
    table, subscriptions = Delivery._meta.db_table, Delivery._meta.get_field("subscription").related_model
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT c.id, c.endpoint_id, c.subscription_id, s.max_events_per_batch, c.owner_id, o.tenant
                FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) AS o(owner_id, tenant, quota)
                CROSS JOIN LATERAL (
                    SELECT d.id, d.endpoint_id, d.subscription_id, d.owner_id FROM {table} d
                    WHERE (d.owner_id, COALESCE(d.tenant_id, 0), d.next_attempt_at)
                          BETWEEN (o.owner_id, o.tenant, '-infinity') AND (o.owner_id, o.tenant, %s)
                      AND d.status = %s AND NOT (d.endpoint_id = ANY(%s::bigint[]))
                    ORDER BY d.owner_id, COALESCE(d.tenant_id, 0), d.next_attempt_at LIMIT o.quota) c
                JOIN {subscriptions._meta.db_table} s ON s.id = c.subscription_id""",
            [[owner for owner, _ in shares], [tenant for _, tenant in shares], [quotas[s] for s in shares], now,
             DeliveryStatus.PENDING, full])
        rows = cursor.fetchall()
    per_share = Counter((row[4], row[5]) for row in rows)
    return in_turn(rows), any(n == quotas[share] for share, n in per_share.items())


def share_quotas(shares: list[tuple[int, int]], count: int) -> dict[tuple[int, int], int]:
    """How many rows of each share to read: `count` split evenly across the owners, and each owner's part evenly
    across its shares (its own rows and each tenant's), rounded up; so an owner with many tenants reads no more
    than one without."""
    owners = Counter(owner for owner, _ in shares)
    per_owner = max(1, -(-count // len(owners)))
    return {(owner, tenant): max(1, -(-per_owner // owners[owner])) for owner, tenant in shares}


def shares_with_due_work(now) -> list[tuple[int, int]]:
    """Up to SHARES_PER_CLAIM (owner, tenant) pairs with due rows (tenant OWN for the owner's own rows), starting
    after the last pair a claim of this process looked at (and wrapping round), so that with more of them than
    that every one gets its turn. A skip scan of the (owner, tenant, next_attempt_at) index of pending rows: one
    index probe per pair with pending rows, not a read of the rows."""
    global _after_share
    table = Delivery._meta.db_table
    query = f"""
        WITH RECURSIVE pending_shares(owner_id, tenant, depth) AS (
            (SELECT owner_id, COALESCE(tenant_id, 0), 1 FROM {table}
             WHERE status = %(pending)s AND (owner_id, COALESCE(tenant_id, 0)) > (%(owner)s, %(tenant)s)
             ORDER BY owner_id, COALESCE(tenant_id, 0) LIMIT 1)
          UNION ALL
            SELECT n.owner_id, n.tenant, p.depth + 1 FROM pending_shares p CROSS JOIN LATERAL (
                SELECT d.owner_id, COALESCE(d.tenant_id, 0) AS tenant FROM {table} d
                WHERE d.status = %(pending)s AND (d.owner_id, COALESCE(d.tenant_id, 0)) > (p.owner_id, p.tenant)
                ORDER BY d.owner_id, COALESCE(d.tenant_id, 0) LIMIT 1) n
            WHERE p.depth < %(scan)s
        )
        SELECT p.owner_id, p.tenant FROM pending_shares p CROSS JOIN LATERAL (
            SELECT 1 FROM {table} d
            WHERE (d.owner_id, COALESCE(d.tenant_id, 0), d.next_attempt_at)
                  BETWEEN (p.owner_id, p.tenant, '-infinity') AND (p.owner_id, p.tenant, %(now)s)
              AND d.status = %(pending)s
            ORDER BY d.owner_id, COALESCE(d.tenant_id, 0), d.next_attempt_at LIMIT 1) due
        LIMIT %(limit)s"""
    found: list[tuple[int, int]] = []
    with connection.cursor() as cursor:
        for after in (_after_share, (0, 0)) if _after_share != (0, 0) else ((0, 0),):
            cursor.execute(query, {"pending": DeliveryStatus.PENDING, "owner": after[0], "tenant": after[1],
                                   "now": now, "limit": SHARES_PER_CLAIM - len(found),
                                   "scan": SHARES_PER_CLAIM * 40})
            found += [share for share in cursor.fetchall() if share not in found]
            if len(found) >= SHARES_PER_CLAIM:
                break
    _after_share = found[-1] if len(found) >= SHARES_PER_CLAIM else (0, 0)
    return [tuple(share) for share in found]


def in_turn(rows: list[tuple]) -> list[tuple]:
    """`rows` (id, endpoint, subscription, batch size, owner, tenant), oldest first within each endpoint, reordered
    so that owners take turns, within an owner its tenants (and its own rows) take turns, and within those their
    endpoints. The owner to go first rotates from claim to claim, so no owner is always last when the batch is
    smaller than the number of owners."""
    by_owner: dict = {}
    for row in rows:
        by_owner.setdefault(row[4], {}).setdefault(row[5] or OWN, {}).setdefault(row[1], []).append(row[:4])
    queues = [_round_robin([_round_robin(list(endpoints.values())) for endpoints in tenants.values()])
              for tenants in by_owner.values()]
    if queues:
        turn = next(_turns) % len(queues)
        queues = queues[turn:] + queues[:turn]
    return _round_robin(queues)


def _round_robin(sequences: list[list]) -> list:
    ordered, depth = [], max((len(s) for s in sequences), default=0)
    for index in range(depth):
        ordered += [sequence[index] for sequence in sequences if index < len(sequence)]
    return ordered


_turns = itertools.count()


def _claim(ids: list[int], subscription_ids: set[int], now) -> list[Delivery]:
    """Lease the still-pending, due rows among `ids` (of `subscription_ids`) and load what their sends need. The
    lease covers the wait for a send slot (HERALD_SEND_START_WINDOW_SECONDS), the longest timeout among their
    subscriptions and a margin. The rows come back from the lease's own UPDATE (RETURNING): no second read of the
    deliveries; their messages, subscriptions and endpoints are read by primary key (docs/benchmarks.md, "Rows
    read per delivery")."""
    if not ids:
        return []
    subscriptions = Subscription.objects.select_related("topic").in_bulk(subscription_ids)
    longest = max(subscription_policy(s).timeout_seconds for s in subscriptions.values())
    window, margin = herald.SEND_START_WINDOW_SECONDS, herald.LEASE_MARGIN_SECONDS
    lease = now + timedelta(seconds=window + longest + margin)
    # The lease and the loads commit together: a claim cut off after its lease (the database or PgBouncer gone)
    # leaves the rows pending, due now. Leased on their own they stayed in flight, unsent and held by nobody, until
    # the lease ran out and the reconciler counted a lost try and waited the policy's first retry delay (84.8 s
    # with Workfront's schedule).
    with transaction.atomic():
        claimed = sorted(_lease(ids, now, lease), key=lambda d: d.id)
        if not claimed:
            return []
        messages = Message.objects.select_related("topic").in_bulk({d.message_id for d in claimed})
        endpoints = Endpoint.objects.in_bulk({d.endpoint_id for d in claimed})
    for delivery in claimed:
        delivery.message, delivery.endpoint = messages[delivery.message_id], endpoints[delivery.endpoint_id]
        delivery.subscription = subscriptions[delivery.subscription_id]
    return claimed


# The status test of a statement that finds its rows by primary key, spelled so that no partial index of pending or
# in-flight rows matches it. With `status = 'pending'` the planner, whose statistics see few pending rows among
# millions of finished ones, preferred the pending rows' index and read every due row to find the 64 it was given:
# a cost that grew with the backlog (docs/benchmarks.md, "Rows read per delivery"). By key, 64 probes.
def status_by_key(alias: str = "") -> str:
    return f"({alias}status || '')"


def _lease(ids: list[int], now, lease) -> list[Delivery]:
    """Flip the still-pending, due rows among `ids` to in_flight with `lease`; returns the rows this call won, as
    they are after the change."""
    pending, due, changes = DeliveryStatus.PENDING, Q(next_attempt_at__lte=now), transitions.claimed(lease=lease)
    if connection.vendor == "postgresql":  # one round trip: the rows come back from the UPDATE
        table = Delivery._meta.db_table
        assignments = ", ".join(f"{Delivery._meta.get_field(name).column} = %s" for name in changes)
        fields = list(Delivery._meta.concrete_fields)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""UPDATE {table} SET {assignments}
                    WHERE id IN (SELECT id FROM {table} WHERE id = ANY(%s) AND {status_by_key()} = %s
                                   AND next_attempt_at <= %s FOR UPDATE SKIP LOCKED)
                    RETURNING {", ".join(f.column for f in fields)}""",
                [*changes.values(), ids, pending, now],
            )
            rows = cursor.fetchall()
        # Every column of a delivery is a plain type psycopg returns as Django would (no converters needed).
        return [Delivery.from_db(connection.alias, [f.attname for f in fields], row) for row in rows]
    with transaction.atomic():  # SQLite (local runs): writers are serialized, no row locks needed
        won = list(Delivery.objects.filter(due, id__in=ids, status=pending).values_list("id", flat=True))
        Delivery.objects.filter(id__in=won).update(**changes)
    return list(Delivery.objects.filter(id__in=won))


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
            f"WHERE d.id = v.id AND {status_by_key('d.')} = %s AND d.lease_until = v.lease "
            f"RETURNING d.id",
            params + [DeliveryStatus.IN_FLIGHT],
        )
        return {row[0] for row in cursor.fetchall()}

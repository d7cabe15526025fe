"""Leases on delivery rows: claim due rows for a worker, and write results back only while the lease is ours.

Claiming is atomic (pending and due → in_flight with a lease), so a duplicate job finds nothing to do, and a job
whose lease expired (it was too slow, or its worker died and the reconciler moved the row on) changes nothing.
"""

from collections import Counter
from datetime import timedelta
from functools import cache

from django.db import connection, transaction
from django.db.models import F

from delivery.conf import herald
from delivery.engine.claiming import due_work
from delivery.engine.plumbing import database, shortcuts
from delivery.engine.plumbing.database import AnyOf
from delivery.engine.plumbing.shortcuts import Statement
from delivery.engine.state import lifecycle, transitions
from delivery.engine.state.effective import subscription_policy_or_default
from delivery.models import Delivery, Message
from delivery.rules.vocabulary import DeliveryStatus
from subscriptions.models import Endpoint, Subscription, Topic

# What a claim loads for its rows, each by a list of keys (one statement whatever their number; PostgreSQL). A
# subscription comes with its topic's columns (a join, one statement instead of two).
SUBSCRIPTION_COLUMNS = [field.attname for field in Subscription._meta.concrete_fields]
TOPIC_COLUMNS = [field.attname for field in Topic._meta.concrete_fields]
SUBSCRIPTIONS = Statement(lambda ids: Subscription.objects.filter(AnyOf(F("pk"), ids)).values_list(
    *SUBSCRIPTION_COLUMNS, *(f"topic__{name}" for name in TOPIC_COLUMNS)), list)
MESSAGES = Statement(lambda ids: Message.objects.filter(AnyOf(F("pk"), ids)), list)
ENDPOINTS = Statement(lambda ids: Endpoint.objects.filter(AnyOf(F("pk"), ids)), list)


def claim(delivery_ids: list[int], now) -> list[Delivery]:
    """Take the due, pending rows among `delivery_ids` (a manual retry, a test); rows another job holds are
    skipped, not waited for."""
    due = dict(lifecycle.due(now, id__in=delivery_ids).values_list("id", "subscription_id"))
    return _claim(list(due), set(due.values()), now)


def claim_due(now, limit: int, *, per_endpoint: int, in_flight: Counter | None = None,
              shares: tuple[Counter, int] | None = None) -> tuple[list[Delivery], bool]:
    """Take up to `limit` requests' worth of due rows, shared fairly: across the owners with due work in turn,
    within an owner across its tenants (and its own rows) in turn, and within those across endpoints in turn, each
    one's oldest due first, so a quiet owner's (or tenant's) fresh delivery goes out with the next claim whatever
    another's backlog, while a busy owner alone still gets every free slot. No endpoint gets more than its room
    (`per_endpoint` requests less what it has `in_flight`); endpoints without room are not read at all. A row of a
    batching subscription is a 1/max_events_per_batch share of a request, and such a subscription gets up to a
    whole batch of its due rows. Rows another worker is taking are skipped. Returns (claimed, whether more was due
    than taken). Every query reads a bounded range of pending rows along an index (docs/architecture.md, "Fair
    claiming"): their cost follows the batch and the shares and endpoints with due work, not the number of pending
    rows. `shares`: (sends each (owner, tenant) holds, the process's slots), to keep each share within its room of
    the slots (rules/send_shares.py)."""
    in_flight = in_flight or Counter()
    return due_work.due_in_turn(now, limit, per_endpoint, in_flight, shares,
                                taking=lambda due, more: _take(due, more, now, limit, per_endpoint, in_flight))


def _take(due: list, more: bool, now, limit: int, per_endpoint: int, in_flight: Counter) -> tuple[list, bool]:
    """`claim_due`'s choice among the due rows read, and their lease, in the reads' transaction."""
    taken: Counter = Counter()
    ids, batching, used, subscriptions, at = [], {}, 0.0, set(), {}
    for row in due:
        weight = 1 / row.batch
        if taken[row.endpoint] + in_flight[row.endpoint] + weight <= per_endpoint + 1e-9:
            taken[row.endpoint] += weight
            ids.append(row.id)
            if row.where:
                at[row.id] = row.where
            subscriptions.add(row.subscription)
            used += weight
            if row.batch > 1:
                batching[row.subscription] = row.batch
            if used >= limit:
                break
    # Endpoints without room were not read: their due rows wait for the sends in flight, and the pump must look
    # again when those complete rather than take "nothing read" for "nothing due".
    more = more or len(due) > len(ids) or any(count >= per_endpoint for count in in_flight.values())
    for extra, batch in due_work.batches(now, batching, ids):  # fill each batch
        ids += extra
        more = more or len(extra) == batch
    if not ids:
        return [], more
    claimed = _claim(ids, subscriptions, now, at=at)
    # (rows the read found that the lease did not win, another's or changed since: due still, perhaps)
    return claimed, more or len(claimed) < len(ids)




def _claim(ids: list[int], subscription_ids: set[int], now, *, at: dict[int, str] | None = None) -> list[Delivery]:
    """Lease the still-pending, due rows among `ids` (of `subscription_ids`) and load what their sends need. The
    lease covers the wait for a send slot (HERALD_SEND_START_WINDOW_SECONDS), the longest timeout among their
    subscriptions and a margin. The rows come back from the lease's own UPDATE (RETURNING): no second read of the
    deliveries; their messages, subscriptions and endpoints are read by primary key (docs/benchmarks.md, "Rows
    read per delivery"). `at`: where the claim's read found some of them ({id: ctid}), so that the lease goes
    straight there instead of probing the primary key."""
    if not ids:
        return []
    subscriptions = _subscriptions(subscription_ids)
    if not subscriptions:
        return []
    # (a policy that no longer merges is its subscription's problem alone: the default decides for it, logged)
    longest = max(subscription_policy_or_default(s)[0].timeout_seconds for s in subscriptions.values())
    window, margin = herald.SEND_START_WINDOW_SECONDS, herald.LEASE_MARGIN_SECONDS
    lease = now + timedelta(seconds=window + longest + margin)
    # The lease and the loads commit together: a claim cut off after its lease (the database or PgBouncer gone)
    # leaves the rows pending, due now. Leased on their own they stayed in flight, unsent and held by nobody, until
    # the lease ran out and the reconciler counted a lost try and waited the policy's first retry delay (84.8 s
    # with Workfront's schedule).
    at = at or {}
    plain = [i for i in ids if i not in at]
    if connection.vendor == "postgresql":  # each group leased and loaded by one statement (in the claim's block)
        with transaction.atomic(savepoint=False):
            loaded = [*_lease_and_load(plain, now, lease), *_lease_and_load(list(at), now, lease, at=list(at.values()))]
        claimed = sorted((delivery for delivery, _, _ in loaded), key=lambda d: d.id)
        messages = {message.pk: message for _, message, _ in loaded if message is not None}
        endpoints = {endpoint.pk: endpoint for _, _, endpoint in loaded if endpoint is not None}
    else:
        with transaction.atomic():
            claimed = sorted(_lease(plain, now, lease), key=lambda d: d.id)
            messages = Message.objects.in_bulk({d.message_id for d in claimed})
            endpoints = Endpoint.objects.in_bulk({d.endpoint_id for d in claimed})
    for delivery in claimed:
        delivery.message, delivery.endpoint = messages[delivery.message_id], endpoints[delivery.endpoint_id]
        delivery.subscription = subscriptions[delivery.subscription_id]
        delivery.message.topic = delivery.subscription.topic  # a delivery's subscription is of its message's topic
    return claimed


def _lease_and_load(ids: list[int], now, lease, *, at: list[str] | None = None) -> list[tuple]:
    """Flip the still-pending, due rows among `ids` to in_flight with `lease` and load what their sends need, in
    one statement (PostgreSQL): (delivery as it is after the change, its message or None, its endpoint or None)
    for each row this call won, each message and endpoint given with the first of its rows only (a fan-out's
    deliveries share one message). `at`: their ctids as a read found them, to go straight to the rows: a row
    changed since is no longer there and is left for the next claim (its id is checked too, as the place may now
    hold another row's version; spelled `id + 0` so that the planner keeps to the TID scan)."""
    if not ids:
        return []
    sql, params, split, after = _lease_and_load_statement(at is not None)
    with database.bound_cursor() as cursor:
        cursor.execute(sql, params(lease, at, ids, now))
        rows = cursor.fetchall()
    deliveries = shortcuts.instances(Delivery, connection.alias, DELIVERY_NAMES, [row[:split] for row in rows])
    messages = iter(MESSAGES.loaded([row[split:after] for row in rows if row[split] is not None]))
    endpoints = iter(ENDPOINTS.loaded([row[after:] for row in rows if row[after] is not None]))
    return [(delivery, next(messages) if row[split] is not None else None,
             next(endpoints) if row[after] is not None else None)
            for delivery, row in zip(deliveries, rows, strict=True)]


def _subscriptions(keys: set[int]) -> dict[int, Subscription]:
    """The claimed rows' subscriptions, each with its topic (the subscriptions of one topic share its instance)."""
    if connection.vendor != "postgresql":
        return Subscription.objects.select_related("topic").in_bulk(keys)
    rows = SUBSCRIPTIONS.rows(list(keys))
    split, topic_at = len(SUBSCRIPTION_COLUMNS), SUBSCRIPTION_COLUMNS.index("topic_id")
    columns: dict = {}
    for row in rows:
        columns.setdefault(row[topic_at], row[split:])
    topics = dict(zip(columns, shortcuts.instances(Topic, connection.alias, TOPIC_COLUMNS, list(columns.values())),
                      strict=True))
    subscriptions = shortcuts.instances(Subscription, connection.alias, SUBSCRIPTION_COLUMNS,
                                       [row[:split] for row in rows])
    for subscription in subscriptions:
        subscription.topic = topics[subscription.topic_id]
    return {subscription.pk: subscription for subscription in subscriptions}


# The status test of a statement that finds its rows by primary key, spelled so that no partial index of pending or
# in-flight rows matches it. With `status = 'pending'` the planner, whose statistics see few pending rows among
# millions of finished ones, preferred the pending rows' index and read every due row to find the 64 it was given:
# a cost that grew with the backlog (docs/benchmarks.md, "Rows read per delivery"). By key, 64 probes.
def status_by_key(alias: str = "") -> str:
    return f"({alias}status || '')"


def _lease(ids: list[int], now, lease) -> list[Delivery]:
    """Flip the still-pending, due rows among `ids` to in_flight with `lease`; returns the rows this call won, as
    they are after the change. SQLite (local runs): writers are serialized, no row locks needed."""
    if not ids:
        return []
    with transaction.atomic():
        won = list(lifecycle.due(now, id__in=ids).values_list("id", flat=True))
        Delivery.objects.filter(id__in=won).update(**transitions.claimed(lease=lease))
    return list(Delivery.objects.filter(id__in=won))


DELIVERY_NAMES = [field.attname for field in Delivery._meta.concrete_fields]


@cache
def _lease_and_load_statement(by_place: bool):
    """`_lease_and_load`'s statement, made once per process for each way of finding the rows: (sql, params(lease,
    at, ids, now), where a row's message columns start, where its endpoint's start)."""
    leasing, params = _lease_statement(by_place)
    message_columns, endpoint_columns = MESSAGES.columns("m"), ENDPOINTS.columns("e")
    delivery_columns = [f"won.{field.column}" for field in Delivery._meta.concrete_fields]
    sql = f"""WITH won AS ({leasing}), firsts AS (
                  SELECT won.*, row_number() OVER (PARTITION BY won.message_id) AS message_first,
                         row_number() OVER (PARTITION BY won.endpoint_id) AS endpoint_first FROM won)
              SELECT {", ".join([*delivery_columns, *message_columns, *endpoint_columns])} FROM firsts AS won
              LEFT JOIN {Message._meta.db_table} m ON won.message_first = 1 AND m.id = won.message_id
              LEFT JOIN {Endpoint._meta.db_table} e ON won.endpoint_first = 1 AND e.id = won.endpoint_id"""
    return sql, params, len(delivery_columns), len(delivery_columns) + len(message_columns)


def _lease_statement(by_place: bool):
    """The UPDATE that leases rows, and how its values are given: (sql, params(lease, at, ids, now)). The rows come
    back from it (RETURNING), found by their physical address (a TID scan) when `by_place`, not by a second probe
    of the primary key."""
    changes = list(transitions.claimed(lease=None))
    table = Delivery._meta.db_table
    assignments = ", ".join(f"{Delivery._meta.get_field(name).column} = %s" for name in changes)
    array = database.array_parameter()
    by = f"ctid = ANY({array}::tid[]) AND (id + 0)" if by_place else "id"
    sql = f"""UPDATE {table} AS d SET {assignments}
              FROM (SELECT ctid FROM {table} WHERE {by} = ANY({array}::bigint[])
                      AND {status_by_key()} = %s AND next_attempt_at <= %s FOR UPDATE SKIP LOCKED) AS won
              WHERE d.ctid = won.ctid
              RETURNING {", ".join(f"d.{f.column}" for f in Delivery._meta.concrete_fields)}"""

    def params(lease, at, ids, now) -> list:
        values = transitions.claimed(lease=lease)
        return [*(values[name] for name in changes), *([at] if by_place else []), ids, DeliveryStatus.PENDING, now]

    return sql, params


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
    # One array per column: the statement is the same whatever the number of rows; the arrays go in binary.
    columns: list[list] = [list(updates), [leases[delivery_id] for delivery_id in updates]]
    for field in fields:
        prepare, name, attname = shortcuts.preparer(field, connection), field.name, field.attname
        columns.append([prepare(changes[name] if name in changes else getattr(by_id[delivery_id], attname))
                        for delivery_id, changes in updates.items()])
    types = ["bigint", "timestamptz"] + [field.db_type(connection) for field in fields]
    table = Delivery._meta.db_table
    assignments = ", ".join(f"{f.column} = v.{f.column}" for f in fields)
    names_of = ", ".join(["id", "lease"] + [f.column for f in fields])
    array = database.array_parameter()
    arrays = ", ".join(f"{array}::{kind}[]" for kind in types)
    # The ids twice: as the rows to join and as the keys to probe (`d.id = ANY`), so that a plan made for any values
    # (db_config.PLANNED_ONCE) probes the primary key; joined to the arrays alone, such a plan scanned the table.
    with database.bound_cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS d SET {assignments} FROM unnest({arrays}) AS v({names_of}) "
            f"WHERE d.id = ANY({array}::bigint[]) AND d.id = v.id AND {status_by_key('d.')} = %s "
            f"AND d.lease_until = v.lease RETURNING d.id",
            [*columns, columns[0], DeliveryStatus.IN_FLIGHT],
        )
        return {row[0] for row in cursor.fetchall()}

"""Which due rows a claim reads, and in what order: fair across owners, within an owner across its tenants (and its
own rows), within those across endpoints, each endpoint's rows oldest first (docs/architecture.md, "Fair
claiming"). Every query reads pending rows along an index, by key or by a bounded range, so its cost follows the
claim and the shares and endpoints with due work, not the number of pending rows. `leases` takes the rows.
"""

import itertools
from collections import Counter

from django.db import connection

from delivery.engine.claiming.read_plans import plans_in_index_order
from delivery.engine.plumbing.database import bound_cursor
from delivery.engine.state import lifecycle
from delivery.models import Delivery
from delivery.rules import claim_turns, send_shares
from delivery.rules.claim_turns import DueRow, EndpointKey
from delivery.rules.send_shares import OWN
from delivery.rules.vocabulary import DeliveryStatus

# The status of the rows claims read, written into their statements rather than passed: a prepared statement is
# planned once for any values (db_config.PLANNED_ONCE), and only a plan whose text says 'pending' may read the
# partial indexes of pending rows (with a parameter there, a claim's plan read every row).
PENDING = f"'{DeliveryStatus.PENDING}'"
SHARES_PER_CLAIM = 256  # (owner, tenant) shares with due work looked at by one claim, in turn after the last one


class Cursors:
    """Where this process's next claim starts looking: after the last share and, per share, the last endpoint a
    claim looked at, and which owner goes first. Fairness cursors, not locks: forgetting one costs one turn's
    order, nothing else, so each process keeps its own (`CURSORS`)."""

    MAX_ENDPOINT_CURSORS = 100_000

    def __init__(self):
        self.after_share: tuple[int, int] = (0, 0)
        self.after_endpoint: dict[tuple[int, int], int] = {}
        self.turns = itertools.count()

    def turn(self, rows: list) -> int:
        """Which owner goes first in this claim: the next one for a claim that takes rows (an empty claim moves no
        owner's turn, or empty and full claims alternating would put the same owner first every time)."""
        return next(self.turns) if rows else 0


CURSORS = Cursors()


def due_in_turn(now, count: int, per_endpoint: int, in_flight: Counter,
                shares: tuple[Counter, int] | None = None, *, taking=None) -> tuple[list, bool]:
    """Up to about `count` due rows, in the order a fair claim takes them: owners in turn, each owner's tenants in
    turn, and their endpoints in turn, each one's rows oldest first (rules/claim_turns.py). Also whether more was
    due than read. What it reads is what a claim can take: each share's part of `count`, split among its endpoints
    with due rows and capped by each one's room, then topped up from the endpoints that had more while room is left
    (a claim of 64 slots read 256 rows to take 64, and beside an endpoint without room read that endpoint's whole
    due backlog to skip it).

    `taking(rows, more)`: what the caller makes of them, inside the reads' transaction (a claim leases its rows in
    it: one transaction, not two); its result is returned instead."""
    taking = taking or (lambda rows, more: (rows, more))
    full = [endpoint_id for endpoint_id, n in in_flight.items() if n >= per_endpoint]
    if connection.vendor != "postgresql":  # SQLite (local runs): one owner in practice; oldest first
        rows = list(lifecycle.due(now).exclude(endpoint_id__in=full).order_by("next_attempt_at")
                    .values_list("id", "endpoint_id", "subscription_id", "subscription__max_events_per_batch",
                                 "owner_id", "tenant_id")[:count * 4])
        due = [DueRow(*row[:5], row[5] or OWN) for row in rows]
        return taking(claim_turns.in_turn(due, CURSORS.turn(due)), len(rows) == count * 4)
    # Which shares have due work: an index walk with nothing to sort, outside the block below, so that a look that
    # finds nothing stays one statement.
    wanting = shares_with_due_work(now)
    if not wanting:
        return [], False
    with plans_in_index_order():
        return taking(*_due_in_turn(now, count, per_endpoint, in_flight, shares, full, wanting))


def _due_in_turn(now, count: int, per_endpoint: int, in_flight: Counter, shares: tuple[Counter, int] | None,
                 full: list[int], wanting: list[tuple[int, int]]) -> tuple[list[DueRow], bool]:
    # Each share within its room of the process's send slots (rules/send_shares.py); one without room waits for
    # its sends to be answered or to stall, and the claim says more is due.
    share_room = send_shares.rooms(wanting, *shares) if shares is not None else None
    without_room = share_room is not None and any(share_room[share] <= 0 for share in wanting)
    if without_room:
        wanting = [share for share in wanting if share_room[share] > 0]
        if not wanting:
            return [], True
    quotas = claim_turns.share_quotas(wanting, count)
    if share_room is not None:
        quotas = {share: min(quota, share_room[share]) for share, quota in quotas.items()}
    found, more = endpoints_with_due_work(now, quotas, full)
    # Each endpoint's read starts at its oldest pending row, found by the walk: (next_attempt_at, id - 1) is just
    # before it in the index.
    after = {EndpointKey(owner, tenant, endpoint): (due_at, first - 1)
             for owner, tenant, endpoint, due_at, first in found}
    room = {key: per_endpoint - in_flight[key.endpoint] for key in after}
    wanted = claim_turns.endpoint_parts(list(after), quotas, room, count, share_room)
    granted, share_left = dict(share_room or {}), dict(share_room or {})
    rows: list[DueRow] = []
    for top_up in range(claim_turns.TOP_UPS + 1):
        read = [DueRow(*row) for row in due_rows(now, wanted, after)]
        rows += read
        read_of: Counter = Counter()
        for row in read:  # (each endpoint's rows come oldest first)
            key = row.key
            read_of[key] += 1
            after[key] = (row.due_at, row.id)
            room[key] -= 1
            if key.share in share_left:
                share_left[key.share] -= 1
        # An endpoint that gave all that was asked may have more: what is left of `count` goes to those, each within
        # its room.
        wanted, had_more = claim_turns.top_up(wanted, read_of, room, share_left, count - len(rows))
        if not wanted or top_up == claim_turns.TOP_UPS:
            more = more or had_more
            break
    if share_room is not None:
        rows, trimmed = claim_turns.within_rooms(rows, granted)
        more = more or trimmed or without_room
    return claim_turns.in_turn(rows, CURSORS.turn(rows)), more


def batches(now, batching: dict[int, int], taken: list[int]) -> list[tuple[list[int], int]]:
    """For each batching subscription in `batching` ({subscription: batch size}), the ids of up to a batch of its
    oldest due rows not among `taken`, with that size. Each is a read of the (subscription, status,
    next_attempt_at) index, planned in its order (inside the claim's `plans_in_index_order`): the one that sorts
    the subscription's backlog read all of it per claim (46.7 ms at 200,000 rows against 0.33, docs/benchmarks.md)."""
    return [(list(lifecycle.due(now, subscription_id=subscription_id).exclude(id__in=taken)
                  .order_by("next_attempt_at").values_list("id", flat=True)[:batch]), batch)
            for subscription_id, batch in batching.items()]


def _pending_shares() -> str:
    """A recursive query `pending_shares(owner_id, tenant, due_at, depth)`: the (owner, tenant) shares with pending
    rows after (%(owner)s, %(tenant)s), each with its oldest pending row's due time, up to %(scan)s of them."""
    table = Delivery._meta.db_table
    # Each step finds the next share's oldest pending row (ORDER BY includes next_attempt_at, so whichever index
    # the planner takes, that is what comes first); the share has due work if that row is due. One probe per share,
    # not two at the same place: its head, where the rows just claimed leave index entries not yet cleaned.
    return f"""
        WITH RECURSIVE pending_shares(owner_id, tenant, due_at, depth) AS (
            (SELECT owner_id, COALESCE(tenant_id, {OWN}), next_attempt_at, 1 FROM {table}
             WHERE status = {PENDING} AND (owner_id, COALESCE(tenant_id, {OWN})) > (%(owner)s, %(tenant)s)
             ORDER BY owner_id, COALESCE(tenant_id, {OWN}), next_attempt_at LIMIT 1)
          UNION ALL
            SELECT n.owner_id, n.tenant, n.next_attempt_at, p.depth + 1 FROM pending_shares p CROSS JOIN LATERAL (
                SELECT d.owner_id, COALESCE(d.tenant_id, {OWN}) AS tenant, d.next_attempt_at FROM {table} d
                WHERE d.status = {PENDING} AND (d.owner_id, COALESCE(d.tenant_id, {OWN})) > (p.owner_id, p.tenant)
                ORDER BY d.owner_id, COALESCE(d.tenant_id, {OWN}), d.next_attempt_at LIMIT 1) n
            WHERE p.depth < %(scan)s
        )"""


def due_sample(now, count: int) -> list[int]:
    """The attempt counts of up to `count` due rows: the oldest of the first share with due work (what the scheduler
    looks at to know that work is due and whether retries are among it). It reads the index the claims read, where
    the rows they took are already marked gone: a look at the due-time index instead read every row claimed since
    its last look (one index entry per delivery). On SQLite (local runs): the oldest due rows."""
    if connection.vendor != "postgresql":
        return list(lifecycle.due(now).order_by("next_attempt_at").values_list("attempt_count", flat=True)[:count])
    table = Delivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""{_pending_shares()}
                SELECT d.attempt_count FROM (SELECT * FROM pending_shares WHERE due_at <= %(now)s LIMIT 1) p
                CROSS JOIN LATERAL (
                    SELECT d.attempt_count FROM {table} d
                    WHERE (d.owner_id, COALESCE(d.tenant_id, {OWN}), d.next_attempt_at)
                          BETWEEN (p.owner_id, p.tenant, '-infinity') AND (p.owner_id, p.tenant, %(now)s)
                      AND d.status = {PENDING}
                    ORDER BY d.owner_id, COALESCE(d.tenant_id, {OWN}), d.next_attempt_at LIMIT %(count)s) d""",
            {"owner": 0, "tenant": 0, "now": now, "count": count,
             "scan": SHARES_PER_CLAIM * 40})
        return [row[0] for row in cursor.fetchall()]


def shares_with_due_work(now) -> list[tuple[int, int]]:
    """Up to SHARES_PER_CLAIM (owner, tenant) pairs with due rows (tenant OWN for the owner's own rows), starting
    after the last pair a claim of this process looked at (and wrapping round), so that with more of them than
    that every one gets its turn. A skip scan of the (owner, tenant, next_attempt_at) index of pending rows: one
    index probe per pair with pending rows, not a read of the rows."""
    query = f"{_pending_shares()} SELECT owner_id, tenant FROM pending_shares WHERE due_at <= %(now)s LIMIT %(limit)s"
    found: list[tuple[int, int]] = []
    with bound_cursor() as cursor:
        cursor_at = CURSORS.after_share
        for after in (cursor_at, (0, 0)) if cursor_at != (0, 0) else ((0, 0),):
            cursor.execute(query, {"owner": after[0], "tenant": after[1],
                                   "now": now, "limit": SHARES_PER_CLAIM - len(found),
                                   "scan": SHARES_PER_CLAIM * 40})
            found += [share for share in cursor.fetchall() if share not in found]
            if len(found) >= SHARES_PER_CLAIM:
                break
    CURSORS.after_share = found[-1] if len(found) >= SHARES_PER_CLAIM else (0, 0)
    return [tuple(share) for share in found]


# The reads of endpoints' rows (the walk's steps, `due_rows`) name the share by equality and order by the endpoint
# index's next columns, the endpoint's included (bounded by row comparisons, never by `endpoint_id = …`, which
# would make that order column a constant). No other index has that order: through the share index (owner, tenant,
# due time) a read must sort the share's backlog, which `plans_in_index_order` prices out. (With the whole key in
# row comparisons, statistics sampled after most of a flood was sent made that path look cheaper even with sorts
# allowed: 120,000 index entries per claim instead of 100.)
ENDPOINTS_SCANNED_PER_WANTED = 40  # endpoints with pending rows probed per endpoint with due rows a share may use
LAST_ENDPOINT = 2**63 - 1


def endpoints_with_due_work(now, quotas: dict[tuple[int, int], int], full: list[int]) -> tuple[list[tuple], bool]:
    """For each share, up to its quota of (owner, tenant, endpoint) with due rows, endpoints without room left
    out, in turn after where this process's last look at that share stopped (wrapping round); each as (owner,
    tenant, endpoint, next_attempt_at, id) of its oldest due row. A skip scan of the (owner, tenant, endpoint,
    next_attempt_at, id) index of pending rows: one probe per endpoint with pending rows, never a read of an
    endpoint's backlog, and at most ENDPOINTS_SCANNED_PER_WANTED probes per endpoint wanted (endpoints whose rows
    are all due later cost a probe each; the next look goes on from where this one stopped, so every endpoint's
    turn comes). Also whether a share may have more endpoints with due work than were taken."""
    cursors = CURSORS.after_endpoint
    if len(cursors) > Cursors.MAX_ENDPOINT_CURSORS:  # forgetting them costs one turn's order
        cursors.clear()
    found: list[tuple] = []
    wanted = dict(quotas)
    more = False
    # First from each share's cursor to its last endpoint, then (for shares whose range ran out before they found
    # enough) from its first endpoint up to the cursor: two disjoint ranges, so nothing is found twice.
    ranges = {share: (cursors.pop(share, 0), LAST_ENDPOINT) for share in quotas}
    for _ in range(2):
        if not ranges:
            break
        shares = list(ranges)
        rows, stopped = _endpoint_walk(now, shares, [ranges[s] for s in shares], [wanted[s] for s in shares], full)
        found += rows
        for share in shares:
            wanted[share] -= sum(1 for row in rows if row[:2] == share)
        for share, endpoint in stopped.items():  # it found enough, or probed as many as it may: go on from there
            cursors[share] = endpoint
            more = True
        ranges = {share: (0, lower) for share, (lower, _) in ranges.items()
                  if share not in stopped and wanted[share] > 0 and lower}
    return found, more


def _endpoint_walk(now, shares: list[tuple[int, int]], ranges: list[tuple[int, int]], wanted: list[int],
                   full: list[int]) -> tuple[list[tuple], dict[tuple[int, int], int]]:
    """(owner, tenant, endpoint, next_attempt_at, id) of each share's endpoints in `ranges` with due rows and room,
    up to `wanted` of them: each step finds the next endpoint's oldest pending row, which says whether it is due
    and is where the read of its rows starts (past the index entries of rows just claimed, read once). Also, for
    the shares whose walk stopped before the end of its range (enough found, or as many probed as it may), the
    endpoint it stopped at."""
    table = Delivery._meta.db_table
    # Each step orders by the endpoint index's columns after the share's (see above ENDPOINTS_SCANNED_PER_WANTED).
    step = f"""SELECT d.endpoint_id, d.next_attempt_at, d.id FROM {table} d
               WHERE d.status = {PENDING} AND d.owner_id = s.owner_id AND COALESCE(d.tenant_id, {OWN}) = s.tenant
                 AND d.endpoint_id > {{after}} AND d.endpoint_id <= s.upto
               ORDER BY d.endpoint_id, d.next_attempt_at, d.id LIMIT 1"""
    # A pending row with no due time (a paused subscription's, held) is not usable, and must not make the count
    # NULL: that ended the walk at such an endpoint, and the endpoints after it were never looked at.
    usable = "COALESCE(w.next_attempt_at <= %(now)s AND NOT (w.endpoint_id = ANY(%(full)s::bigint[])), false)::int"
    with bound_cursor() as cursor:
        cursor.execute(
            f"""SELECT s.owner_id, s.tenant, e.endpoint_id, e.next_attempt_at, e.id, e.usable,
                       e.usable_so_far = s.wanted OR e.depth = s.wanted * %(scan)s
                FROM unnest(%(owners)s::bigint[], %(tenants)s::bigint[], %(lower)s::bigint[], %(upto)s::bigint[],
                            %(wanted)s::int[]) WITH ORDINALITY AS s(owner_id, tenant, lower, upto, wanted, n)
                CROSS JOIN LATERAL (
                    WITH RECURSIVE walk(endpoint_id, next_attempt_at, id, depth, usable, usable_so_far) AS (
                        (SELECT w.*, 1, {usable}, {usable} FROM ({step.format(after="s.lower")}) w)
                      UNION ALL
                        SELECT w.*, p.depth + 1, {usable}, p.usable_so_far + {usable} FROM walk p
                        CROSS JOIN LATERAL ({step.format(after="p.endpoint_id")}) w
                        WHERE p.usable_so_far < s.wanted AND p.depth < s.wanted * %(scan)s
                    )
                    SELECT * FROM walk
                    WHERE usable = 1 OR usable_so_far = s.wanted OR depth = s.wanted * %(scan)s) e
                ORDER BY s.n, e.depth""",
            {"owners": [o for o, _ in shares], "tenants": [t for _, t in shares], "lower": [r[0] for r in ranges],
             "upto": [r[1] for r in ranges], "wanted": wanted, "scan": ENDPOINTS_SCANNED_PER_WANTED, "full": full,
             "now": now})
        rows = cursor.fetchall()
    stopped = {(owner, tenant): endpoint for owner, tenant, endpoint, *_, last in rows if last}
    return [row[:5] for row in rows if row[5]], stopped


def due_rows(now, wanted: dict[tuple[int, int, int], int], after: dict[tuple[int, int, int], tuple]) -> list[tuple]:
    """For each (owner, tenant, endpoint) in `wanted`, up to that many of its due rows oldest first, after the
    (next_attempt_at, id) in `after`: (id, endpoint, subscription, batch size, owner, tenant, next_attempt_at,
    ctid), each endpoint's oldest first. A row range of the (owner, tenant, endpoint, next_attempt_at, id) index:
    it reads the rows it returns, whatever the statistics (see above ENDPOINTS_SCANNED_PER_WANTED)."""
    keys = list(wanted)
    table, subscriptions = Delivery._meta.db_table, Delivery._meta.get_field("subscription").related_model
    with bound_cursor() as cursor:
        cursor.execute(
            f"""SELECT c.id, c.endpoint_id, c.subscription_id, s.max_events_per_batch, c.owner_id, o.tenant,
                       c.next_attempt_at, c.ctid::text
                FROM unnest(%(owners)s::bigint[], %(tenants)s::bigint[], %(endpoints)s::bigint[],
                            %(times)s::timestamptz[], %(ids)s::bigint[], %(wanted)s::int[]) WITH ORDINALITY
                     AS o(owner_id, tenant, endpoint_id, after_time, after_id, wanted, n)
                CROSS JOIN LATERAL (
                    SELECT d.id, d.endpoint_id, d.subscription_id, d.owner_id, d.next_attempt_at, d.ctid
                    FROM {table} d
                    WHERE d.status = {PENDING} AND d.owner_id = o.owner_id AND COALESCE(d.tenant_id, {OWN}) = o.tenant
                      AND (d.endpoint_id, d.next_attempt_at, d.id) > (o.endpoint_id, o.after_time, o.after_id)
                      AND (d.endpoint_id, d.next_attempt_at) <= (o.endpoint_id, %(now)s)
                    ORDER BY d.endpoint_id, d.next_attempt_at, d.id LIMIT o.wanted) c
                JOIN {subscriptions._meta.db_table} s ON s.id = c.subscription_id
                ORDER BY o.n, c.next_attempt_at, c.id""",
            {"owners": [k[0] for k in keys], "tenants": [k[1] for k in keys], "endpoints": [k[2] for k in keys],
             "times": [after[k][0] for k in keys], "ids": [after[k][1] for k in keys],
             "wanted": [wanted[k] for k in keys], "now": now})
        return cursor.fetchall()

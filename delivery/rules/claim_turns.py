"""A fair claim's arithmetic, apart from the database that holds the rows (docs/architecture.md, "Fair claiming"):
how many due rows each share and each endpoint of a claim reads, and the order in which the claim takes them —
owners in turn, within an owner its tenants (and its own rows) in turn, within those their endpoints in turn, each
endpoint's rows oldest first. `engine/claiming/due_work.py` reads the rows these numbers ask for. Pure: which owner
goes first in a claim (`turn`) is passed in.
"""

from collections import Counter
from datetime import datetime
from typing import NamedTuple

from delivery.rules.send_shares import OWN, Share

TOP_UPS = 2  # further reads of the endpoints that had more, while a claim has room left


class EndpointKey(NamedTuple):
    """An endpoint's rows within one share: what a claim reads in one range of the endpoint index."""

    owner: int
    tenant: int  # OWN for the owner's own rows
    endpoint: int

    @property
    def share(self) -> Share:
        return self.owner, self.tenant


class DueRow(NamedTuple):
    """A due row as a claim reads it."""

    id: int
    endpoint: int
    subscription: int
    batch: int  # the subscription's max_events_per_batch: the row is 1/batch of a request
    owner: int
    tenant: int  # OWN for the owner's own rows
    due_at: datetime | None = None
    where: str | None = None  # the row's ctid, where the read found it (the lease goes straight there)

    @property
    def key(self) -> EndpointKey:
        return EndpointKey(self.owner, self.tenant, self.endpoint)


def _up(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def share_quotas(shares: list[Share], count: int) -> dict[Share, int]:
    """How many rows of each share to read: `count` split evenly across the owners, and each owner's part evenly
    across its shares (its own rows and each tenant's), rounded up; so an owner with many tenants reads no more
    than one without."""
    owners = Counter(owner for owner, _ in shares)
    per_owner = max(1, _up(count, len(owners))) if owners else 0
    return {(owner, tenant): max(1, _up(per_owner, owners[owner])) for owner, tenant in shares}


def endpoint_parts(keys: list[EndpointKey], quotas: dict[Share, int], room: dict[EndpointKey, int], count: int,
                   share_room: dict[Share, int] | None) -> dict[EndpointKey, int]:
    """How many rows of each endpoint (in its share) the first read takes: its share's quota divided among the
    share's endpoints, or an even part of the whole claim if that is more (so that slots a quiet share leaves
    unused are read at once, not by a second query), within the endpoint's room and, with `share_room`, its
    share's room of the send slots divided among its endpoints. At least one each."""
    per_share = Counter(key.share for key in keys)
    even = _up(count, max(1, len(keys)))
    wanted = {key: max(1, min(max(_up(quotas[key.share], per_share[key.share]), even), int(room[key])))
              for key in keys}
    if share_room is not None:
        wanted = {key: max(1, min(n, _up(share_room[key.share], per_share[key.share]))) for key, n in wanted.items()}
    return wanted


def top_up(wanted: dict[EndpointKey, int], read: Counter, room: dict[EndpointKey, int],
           share_room: dict[Share, int], left: int) -> tuple[dict[EndpointKey, int], bool]:
    """After a read that took `read` rows of each endpoint (and `room`, `share_room` updated for them): what the
    next read takes, `left` rows shared among the endpoints that gave all that was asked (they may have more), each
    within its room and its share's (shares missing from `share_room` are not bounded by it); and whether any
    endpoint gave all that was asked. Nothing to take when `left` is used up or no such endpoint has room."""
    had_more = [key for key in wanted if read[key] == wanted[key]]
    room_left = [key for key in had_more if room[key] >= 1 and share_room.get(key.share, 1) >= 1]
    if left <= 0 or not room_left:
        return {}, bool(had_more)
    return ({key: max(1, min(_up(left, len(room_left)), int(room[key]), share_room.get(key.share, left)))
             for key in room_left}, bool(had_more))


def within_rooms(rows: list[DueRow], rooms: dict[Share, int]) -> tuple[list[DueRow], bool]:
    """At most each share's room of `rows`, its endpoints in turn; and whether any was left out."""
    by_share: dict = {}
    for row in rows:
        by_share.setdefault((row.owner, row.tenant), {}).setdefault(row.endpoint, []).append(row)
    kept, trimmed = [], False
    for share, endpoints in by_share.items():
        ordered = round_robin(list(endpoints.values()))
        kept += ordered[:rooms[share]]
        trimmed = trimmed or len(ordered) > rooms[share]
    return kept, trimmed


def in_turn(rows: list[DueRow], turn: int) -> list[DueRow]:
    """`rows`, oldest first within each endpoint, reordered so that owners take turns, within an owner its tenants
    (and its own rows) take turns, and within those their endpoints. The owner to go first is the `turn`-th (modulo
    their number): a claimer rotates it from claim to claim, so no owner is always last when the batch is smaller
    than the number of owners."""
    by_owner: dict = {}
    for row in rows:
        by_owner.setdefault(row.owner, {}).setdefault(row.tenant or OWN, {}).setdefault(row.endpoint, []).append(row)
    queues = [round_robin([round_robin(list(endpoints.values())) for endpoints in tenants.values()])
              for tenants in by_owner.values()]
    if queues:
        first = turn % len(queues)
        queues = queues[first:] + queues[:first]
    return round_robin(queues)


def round_robin(sequences: list[list]) -> list:
    """The first of each sequence, then the second of each, and so on."""
    ordered, depth = [], max((len(s) for s in sequences), default=0)
    for index in range(depth):
        ordered += [sequence[index] for sequence in sequences if index < len(sequence)]
    return ordered

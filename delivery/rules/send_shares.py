"""Send capacity in shares: how many of a process's send slots each (owner, tenant) share may hold
(docs/architecture.md, "Send slots in shares").

A process has `total` send slots. A slot is held by a send from its start until it is answered, or until it has
waited HERALD_STALLED_SEND_SECONDS without an answer: from then on it counts against its endpoint's room only (the
endpoint never has more than HERALD_MAX_IN_FLIGHT_PER_ENDPOINT in flight), so endpoints that accept connections and
never answer cannot hold the slots everyone shares.

Of the slots, RESERVE_FRACTION is kept for shares with nothing in flight, so a fresh delivery of a quiet tenant always
finds one at once, whatever the others hold; the rest is divided max-min fairly, first across owners, then within
each owner across its shares (its own rows and each tenant): a share that wants no more keeps what it holds, the
others divide what is left evenly, and a share alone gets it all. Rooms are shares of the total, never fixed counts
that add up past it.
"""

import math
from collections import Counter
from collections.abc import Iterable

RESERVE_FRACTION = 1 / 8

Share = tuple[int, int]  # (owner id, tenant id or OWN)
OWN = 0  # the tenant of an owner's own rows (and sends) in a share, and in the indexes that order rows by share


UNSHARED: Share = (0, OWN)  # a send no owner's share is known for (a tool's): no owner has id 0


def share_of(owner_id: int, tenant_id: int | None) -> Share:
    """The share a row (or a send) of `owner_id` and `tenant_id` (None for the owner's own) is in."""
    return owner_id, tenant_id or OWN


def rooms(wanting: Iterable[Share], active: Counter, total: int) -> dict[Share, int]:
    """How many more sends each share in `wanting` (those with due work) may start, given what each share holds
    (`active`: sends started, not yet answered nor stalled)."""
    wanting = list(dict.fromkeys(wanting))
    held = {share: n for share, n in active.items() if n > 0}
    free_now = total - sum(held.values())
    usable = total - math.ceil(total * RESERVE_FRACTION)
    # What each share would take: what it holds if it wants no more, else without bound.
    demand = {share: math.inf for share in wanting} | {share: n for share, n in held.items() if share not in wanting}
    by_owner: dict[int, dict[Share, float]] = {}
    for share, want in demand.items():
        by_owner.setdefault(share[0], {})[share] = want
    owner_caps = _fill({owner: sum(shares.values()) for owner, shares in by_owner.items()}, usable)
    found = {}
    for owner, shares in by_owner.items():
        caps = _fill(shares, owner_caps[owner])
        for share in shares:
            if share in wanting:
                room = int(caps[share]) - held.get(share, 0)
                if not held.get(share):  # a share with nothing in flight may use the reserve
                    room = max(room, min(free_now, math.ceil(total * RESERVE_FRACTION)))
                found[share] = max(0, min(room, free_now))
    return found


def _fill(demands: dict, capacity: float) -> dict:
    """Max-min fair division of `capacity`: the smallest demands are met in full, the rest share what is left
    evenly."""
    caps, left, waiting = {}, capacity, sorted(demands, key=lambda key: demands[key])
    while waiting:
        even = left / len(waiting)
        key = waiting[0]
        if demands[key] <= even:
            caps[key] = demands[key]
            left -= demands[key]
            waiting.pop(0)
        else:
            for key in waiting:
                caps[key] = even
            break
    return caps


def most_stalled(stalled: Counter, share: Share) -> Share:
    """The share whose stalled send is cut when the process holds all the stalled sends it may and `share`'s send
    stalls too, owners first, as slots are divided: the owner holding the most stalled sends (counting the new
    one), then within it the share holding the most; on a tie, `share` (or its owner) itself. An owner holding
    less than the most is within its part, however its sends are spread over tenants, so it never loses a send to
    another owner's silence (one owner's silent endpoints spread over many tenants cannot make a neighbour owner's
    single busy share look like the one holding the most)."""
    counts = Counter({key: n for key, n in stalled.items() if n > 0})
    counts[share] += 1
    by_owner: Counter = Counter()
    for key, n in counts.items():
        by_owner[key[0]] += n
    owner = share[0] if by_owner[share[0]] == max(by_owner.values()) else max(by_owner, key=by_owner.get)
    within = {key: n for key, n in counts.items() if key[0] == owner}
    most = max(within.values())
    return share if within.get(share) == most else max(within, key=within.get)

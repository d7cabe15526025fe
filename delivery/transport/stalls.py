"""Stalled sends in shares: the process's bound on sends that gave their slot back and still wait for an answer
(open connections beyond the slots), kept per (owner, tenant) share. On the transport's loop only.

A send unanswered after HERALD_STALLED_SEND_SECONDS gives its slot back and waits on, counted against its endpoint's
room (HERALD_MAX_IN_FLIGHT_PER_ENDPOINT). The process keeps at most `limit` such sends open. When one more stalls
at the bound, Herald ends one: the oldest stalled send of the share holding the most within the owner holding the
most (`send_shares.most_stalled`), which may be the new one's own. An owner within its part never loses a send to
another owner's silence, however that one spreads it over its tenants, and
what Herald ends is recorded as Herald's (`cut_short`): not counted in its endpoint's health, not spending an
attempt of its delivery, retried shortly.
"""

from collections import Counter

from delivery.rules.send_shares import most_stalled


class StalledSends:
    def __init__(self, limit: int):
        self.limit = limit
        self.by_share: dict = {}  # share -> {slot: None}, oldest first
        self.counts: Counter = Counter()

    def __len__(self) -> int:
        return sum(self.counts.values())

    def add(self, slot):
        """Keep `slot` (a send that just stalled) if the bound allows, after making room if need be. Returns the
        send Herald ends instead: `slot` itself, another share's oldest stalled send (no longer kept here), or
        None."""
        victim = None
        if len(self) >= self.limit:
            share = most_stalled(self.counts, slot.share)
            if share == slot.share:
                return slot
            victim = next(iter(self.by_share[share]))
            self.remove(victim)
        self.by_share.setdefault(slot.share, {})[slot] = None
        self.counts[slot.share] += 1
        return victim

    def remove(self, slot) -> bool:
        """`slot` is no longer a stalled send (answered, ended or cut); whether it was one."""
        kept = self.by_share.get(slot.share)
        if kept is None or slot not in kept:
            return False
        del kept[slot]
        self.counts[slot.share] -= 1
        if not kept:
            del self.by_share[slot.share]
            del self.counts[slot.share]
        return True

"""transport/stalls: the process's stalled sends kept in shares; at the bound, the share holding the most loses one."""

from collections import Counter

from delivery.rules.send_shares import most_stalled
from delivery.transport.stalls import StalledSends

A, B, C = (1, 0), (1, 7), (2, 0)


class Send:
    def __init__(self, share):
        self.share = share


def test_below_the_bound_every_stalled_send_is_kept():
    stalled = StalledSends(limit=3)
    sends = [Send(A), Send(B), Send(A)]
    assert [stalled.add(send) for send in sends] == [None, None, None]
    assert stalled.counts == Counter({A: 2, B: 1}) and len(stalled) == 3


def test_at_the_bound_the_oldest_send_of_the_share_holding_the_most_is_ended_to_make_room():
    stalled = StalledSends(limit=3)
    first, second, third = Send(A), Send(A), Send(A)
    for send in (first, second, third):
        stalled.add(send)
    newcomer = Send(C)
    assert stalled.add(newcomer) is first
    assert stalled.counts == Counter({A: 2, C: 1})
    assert stalled.remove(first) is False  # already let go: its end is not counted twice


def test_a_share_that_holds_the_most_loses_its_own_new_send():
    stalled = StalledSends(limit=3)
    for send in (Send(A), Send(A), Send(C)):
        stalled.add(send)
    mine = Send(A)
    assert stalled.add(mine) is mine
    assert stalled.counts == Counter({A: 2, C: 1})


def test_the_share_to_cut_counts_the_new_send_and_a_tie_goes_to_the_newcomer():
    assert most_stalled(Counter({A: 4, B: 4}), C) == A or most_stalled(Counter({A: 4, B: 4}), C) == B
    assert most_stalled(Counter({A: 4, C: 3}), C) == C  # 4 against 4: its own
    assert most_stalled(Counter({A: 4, C: 2}), C) == A
    assert most_stalled(Counter(), C) == C


def test_owners_first_however_one_spreads_its_silence_over_tenants():
    """One owner's silent endpoints over eight tenants, two stalled sends each, against another owner's single
    share holding four (an endpoint answering in 1.5 s): the owner holding the most loses one, not the neighbour."""
    spread = Counter({(1, tenant): 2 for tenant in range(1, 9)})
    assert most_stalled(spread + Counter({(2, 0): 4}), (2, 0))[0] == 1
    assert most_stalled(spread + Counter({(2, 0): 4}), (1, 3)) == (1, 3)  # its own new one, among equals

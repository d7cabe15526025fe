"""rules/send_shares: each (owner, tenant) share's room of a process's send slots."""

from collections import Counter

from delivery.rules.send_shares import rooms

A, B, C = (1, 0), (1, 7), (2, 0)  # owner 1's own rows, owner 1's tenant 7, owner 2


def test_a_share_alone_gets_all_but_the_reserve():
    assert rooms([A], Counter(), 512) == {A: 448}
    assert rooms([A], Counter({A: 400}), 512) == {A: 48}


def test_a_share_with_nothing_in_flight_always_finds_the_reserve():
    # A holds what it may; B arrives with a fresh delivery: B gets the reserve at once, A no more
    assert rooms([A, B], Counter({A: 448}), 512) == {A: 0, B: 64}


def test_shares_that_want_more_divide_evenly_within_the_owner_then_across_owners():
    assert rooms([A, B], Counter(), 512) == {A: 224, B: 224}
    assert rooms([A, B, C], Counter(), 512) == {A: 112, B: 112, C: 224}


def test_a_share_that_wants_no_more_keeps_what_it_holds_and_leaves_the_rest():
    assert rooms([A], Counter({B: 10}), 512) == {A: 438}


def test_no_room_is_more_than_the_free_slots():
    assert rooms([A, B, C], Counter({(3, 0): 500}), 512) == {A: 12, B: 12, C: 12}  # (a claim takes 12 at most)


def test_a_share_with_nothing_in_flight_gets_the_reserve_even_where_its_even_part_is_smaller():
    # twenty owners hold 22 slots each and want more; a twenty-first arrives with nothing in flight: its even part
    # would be 21 slots, the reserve gives it 64 at once
    holders = [(owner, 0) for owner in range(1, 21)]
    found = rooms([*holders, (99, 0)], Counter({share: 22 for share in holders}), 512)
    assert found[(99, 0)] == 64
    assert all(found[share] == 0 for share in holders)

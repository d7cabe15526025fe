"""A fair claim's arithmetic (rules/claim_turns.py), without a database: the rows a claim reads per share and
endpoint, and the order it takes them in."""

from collections import Counter

from delivery.rules.claim_turns import (
    DueRow,
    EndpointKey,
    endpoint_parts,
    in_turn,
    round_robin,
    share_quotas,
    top_up,
    within_rooms,
)
from delivery.rules.send_shares import OWN, share_of


def row(n: int, endpoint: int, owner: int, tenant: int = OWN) -> DueRow:
    return DueRow(id=n, endpoint=endpoint, subscription=endpoint, batch=1, owner=owner, tenant=tenant)


def test_a_row_without_a_tenant_is_in_its_owners_own_share():
    assert share_of(7, None) == (7, OWN) == (7, 0)
    assert share_of(7, 3) == (7, 3)
    assert row(1, 10, owner=7).key == EndpointKey(7, OWN, 10) and row(1, 10, owner=7).key.share == (7, OWN)


def test_each_owner_reads_an_even_part_and_splits_it_across_its_shares():
    # Two owners: 64 rows → 32 each; the first has its own rows and three tenants' → 8 each.
    assert share_quotas([(1, OWN), (1, 5), (1, 6), (1, 7), (2, OWN)], 64) == {
        (1, OWN): 8, (1, 5): 8, (1, 6): 8, (1, 7): 8, (2, OWN): 32}
    assert share_quotas([(1, OWN)], 3) == {(1, OWN): 3}
    assert share_quotas([(n, OWN) for n in range(10)], 4) == {(n, OWN): 1 for n in range(10)}  # at least one each
    assert share_quotas([], 64) == {}


def test_an_endpoints_part_is_its_shares_part_or_an_even_part_within_its_room():
    a, b, c = EndpointKey(1, OWN, 10), EndpointKey(1, OWN, 11), EndpointKey(2, OWN, 20)
    quotas = {(1, OWN): 32, (2, OWN): 32}
    room = {a: 32, b: 3, c: 0}
    # a: its share's 32 split in two = 16 (more than the even 22? no: even part of 64 over 3 is 22, the larger)
    assert endpoint_parts([a, b, c], quotas, room, 64, None) == {a: 22, b: 3, c: 1}
    # within its share's room of the send slots, divided among the share's endpoints
    assert endpoint_parts([a, b, c], quotas, room, 64, {(1, OWN): 4, (2, OWN): 9}) == {a: 2, b: 2, c: 1}


def test_a_top_up_goes_to_the_endpoints_that_gave_all_that_was_asked():
    a, b, c = EndpointKey(1, OWN, 10), EndpointKey(1, OWN, 11), EndpointKey(2, OWN, 20)
    wanted = {a: 4, b: 4, c: 4}
    read = Counter({a: 4, b: 2, c: 4})  # b had no more
    room = {a: 10, b: 10, c: 0}  # c has no room left
    assert top_up(wanted, read, room, {}, 20) == ({a: 10}, True)
    assert top_up(wanted, read, room, {(1, OWN): 3}, 20) == ({a: 3}, True)
    assert top_up(wanted, read, room, {(1, OWN): 0}, 20) == ({}, True)  # its share has no room
    assert top_up(wanted, read, room, {}, 0) == ({}, True)  # the claim is full
    assert top_up(wanted, Counter({a: 1, b: 1, c: 1}), room, {}, 20) == ({}, False)  # nobody had more


def test_rows_beyond_a_shares_room_are_left_out_its_endpoints_in_turn():
    rows = [row(1, 10, 1), row(2, 10, 1), row(3, 10, 1), row(4, 11, 1), row(5, 20, 2)]
    assert within_rooms(rows, {(1, OWN): 2, (2, OWN): 5}) == ([row(1, 10, 1), row(4, 11, 1), row(5, 20, 2)], True)
    assert within_rooms(rows, {(1, OWN): 9, (2, OWN): 9})[1] is False


def test_owners_then_their_tenants_then_their_endpoints_take_turns():
    alice_own = [row(1, 10, 1), row(2, 10, 1), row(3, 11, 1)]
    alice_tenant = [row(4, 12, 1, tenant=5)]
    bob = [row(6, 20, 2), row(7, 20, 2)]
    taken = [r.id for r in in_turn(alice_own + alice_tenant + bob, turn=0)]
    # Alice: own endpoint 10, tenant 5, own endpoint 11, own endpoint 10 again; Bob: his two, alternating with hers.
    assert taken == [1, 6, 4, 7, 3, 2]
    assert [r.id for r in in_turn(alice_own + alice_tenant + bob, turn=1)] == [6, 1, 7, 4, 3, 2]  # Bob first
    assert in_turn([], turn=3) == []


def test_round_robin_takes_the_first_of_each_then_the_second():
    assert round_robin([[1, 2, 3], [4], [5, 6]]) == [1, 4, 5, 2, 6, 3]
    assert round_robin([]) == []

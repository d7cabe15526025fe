"""cidr (pure): an IPv4 or IPv6 address string within a network."""

import pytest

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.cidr import Cidr

CIDR = Cidr()


@pytest.mark.parametrize("argument, problem", [
    ("10.0.0.0/24", None), ("10.0.0.1/24", None), ("2001:db8::/32", None), ("10.0.0.1", None),
    ("10.0.0.0/33", "must be an IP network such as \"10.0.0.0/24\""), (5, "must be an IP network such as "
                                                                        "\"10.0.0.0/24\""),
    ("eu", "must be an IP network such as \"10.0.0.0/24\""),
])
def test_what_a_network_may_be(argument, problem):
    assert CIDR.problem(argument) == problem


@pytest.mark.parametrize("argument, value, expected", [
    ("10.0.0.0/24", "10.0.0.0", True), ("10.0.0.0/24", "10.0.0.255", True), ("10.0.0.0/24", "10.0.1.0", False),
    ("10.0.0.0/24", "not an address", False), ("2001:db8::/32", "2001:db8::1", True),
    ("2001:db8::/32", "10.0.0.1", False), ("10.0.0.0/8", "::ffff:10.0.0.1", False), ("10.0.0.0/24", 167772161, False),
])
def test_meaning_for_one_value_and_for_many(argument, value, expected):
    assert CIDR.one(argument, value) is expected
    assert CIDR.any_in(argument, Index([value])) is expected
    assert CIDR.any_in(argument, Index(["9.255.255.255", value, "11.0.0.0", "::1"])) is expected

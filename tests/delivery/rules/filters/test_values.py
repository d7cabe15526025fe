"""Leaf values (pure): their kinds, and how exact values compare (numbers to five decimals, as SNS)."""

import pytest

from delivery.rules.filters.values import address, has_value, identity, number_problem, scaled, value_kind


@pytest.mark.parametrize("value, kind", [
    ("a", "string"), ("", "string"), (3, "number"), (1.5, "number"), (10 ** 400, "number"), (True, "boolean"),
    (False, "boolean"), (None, "null"), (float("nan"), None), (float("inf"), None), ({"a": 1}, None), ([1], None),
])
def test_value_kind(value, kind):
    assert value_kind(value) == kind


@pytest.mark.parametrize("number, expected", [
    (3, 300_000), (100.123456789, 10_012_346), (0.000025, 3), (-0.000025, -3), (1e-6, 0), (301.5, 30_150_000),
])
def test_numbers_are_scaled_to_five_decimals_rounded_half_up(number, expected):
    assert scaled(number) == expected


def test_identity_is_kind_and_value():
    assert identity(1) == identity(1.0) == identity(1.000001) == ("number", 100_000)
    assert identity(True) == ("boolean", True) != identity(1)
    assert identity("1") == ("string", "1") != identity(1)
    assert identity(None) == ("null", None)


@pytest.mark.parametrize("value, problem", [
    (1e9, None), (-1e9, None), (0, None), (1e9 + 1, "must be a number between -1e9 and 1e9"),
    (float("nan"), "must be a number between -1e9 and 1e9"), (float("-inf"), "must be a number between -1e9 and 1e9"),
])
def test_a_policys_numbers_lie_within_a_billion(value, problem):
    assert number_problem(value) == problem


def test_a_key_has_a_value_unless_every_value_is_null():
    assert has_value(["a"]) is True
    assert has_value([None, 0]) is True
    assert has_value([None]) is False
    assert has_value([]) is False


@pytest.mark.parametrize("value, expected", [
    ("10.0.0.1", "10.0.0.1"), ("::1", "::1"), ("fe80::1", "fe80::1"), ("10.0.0.256", None), ("eu", None),
    ("10.0.0.1 ", None), (167772161, None), (None, None),
])
def test_an_address_is_a_string_that_parses_as_one(value, expected):
    parsed = address(value)
    assert (str(parsed) if parsed is not None else None) == expected

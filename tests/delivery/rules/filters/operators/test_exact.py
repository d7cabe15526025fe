"""A plain value as a condition (pure): equal to it, by kind; numbers to five decimals."""

import pytest

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.exact import Exact

EXACT = Exact()


@pytest.mark.parametrize("argument, problem", [
    ("eu", None), (3, None), (-1e9, None), (True, None), (None, None),
    (1e10, "must be a number between -1e9 and 1e9"),
    ([1], "must be a string, a number, true, false, null or an operator object such as {\"prefix\": \"a\"}"),
    (float("nan"), "must be a number between -1e9 and 1e9"),
])
def test_what_an_exact_condition_may_be(argument, problem):
    assert EXACT.problem(argument) == problem


@pytest.mark.parametrize("argument, value, expected", [
    ("eu", "eu", True), ("eu", "EU", False), ("3", 3, False), (3, "3", False), (3, 3.0, True),
    (301.5, 3.015e2, True), (100.1234567, 100.123456789, True), (1, True, False), (True, 1, False),
    (True, True, True), (False, False, True), (None, None, True), (None, "null", False), (0, None, False),
    (1, float("inf"), False),
])
def test_equal_by_kind_and_value(argument, value, expected):
    assert EXACT.one(argument, value) is expected
    assert EXACT.any_in(argument, Index([value])) is expected


def test_any_of_many_values():
    index = Index(["a", 2, None, False])
    assert [EXACT.any_in(argument, index) for argument in ("a", "b", 2.0, 3, None, False, True)] == [
        True, False, True, False, True, True, False]

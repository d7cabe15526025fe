"""numeric (pure): one comparison or a range, compared to five decimals; many values by bisection."""

import pytest

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.numeric import Numeric

NUMERIC = Numeric()
EXAMPLE = "such as [\"=\", 5] or [\">\", 0, \"<=\", 150]"


@pytest.mark.parametrize("terms, problem", [
    (["=", 5], None), ([">", 0, "<=", 150], None), ([">=", -1e9, "<", 1e9], None),
    ([">"], f"must be one or two comparisons, {EXAMPLE}"), ("> 5", f"must be one or two comparisons, {EXAMPLE}"),
    (["~", 1], "[0]: unknown operator '~'; use one of =, <, <=, >, >="),
    ([">", 0, "<=", "x"], "[3]: must be a number between -1e9 and 1e9"),
    ([">", 2e9], "[1]: must be a number between -1e9 and 1e9"),
    (["<", 5, ">", 1], "a range is a lower bound (> or >=) then an upper bound (< or <=)"),
    ([">", 5, "<", 5.000001], "the lower bound 5 is not below the upper bound 5.000001"),
])
def test_what_a_comparison_may_be(terms, problem):
    assert NUMERIC.problem(terms) == problem


@pytest.mark.parametrize("terms, value, expected", [
    (["=", 301.5], 301.5, True), (["=", 301.5], 300, False), (["=", 5], 5.000001, True),
    ([">", 0, "<=", 150], 100, True), ([">", 0, "<=", 150], 150, True), ([">", 0, "<=", 150], 0, False),
    ([">", 0, "<=", 150], 150.001, False), (["<", 0], -1, True), ([">=", 0], "5", False), ([">=", 0], True, False),
    ([">=", 0], None, False), (["<", 0], float("-inf"), False),
])
def test_meaning_for_one_value(terms, value, expected):
    assert NUMERIC.one(terms, value) is expected
    assert NUMERIC.any_in(terms, Index([value])) is expected


@pytest.mark.parametrize("terms, expected", [
    (["=", 10], True), (["=", 11], False), ([">", 10, "<", 20], False), ([">=", 10, "<", 20], True),
    ([">", 5, "<=", 5.5], False), ([">", 30], True), ([">", 31], False), (["<", 1], False), (["<=", 1], True),
])
def test_any_of_many_values(terms, expected):
    index = Index([1, 10, 20, 31, "15", None])
    assert NUMERIC.any_in(terms, index) is expected
    assert any(NUMERIC.one(terms, value) for value in index.values) is expected

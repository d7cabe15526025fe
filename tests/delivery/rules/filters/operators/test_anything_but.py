"""anything-but (pure): a value passes unless it is excluded (or has the prefix, the suffix, matches the pattern);
null passes none."""

import pytest

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.anything_but import AnythingBut

ANYTHING_BUT = AnythingBut()


@pytest.mark.parametrize("argument, problem", [
    ("rugby", None), (["rugby", "tennis"], None), (100, None), ([100, "x"], None), ({"prefix": "order-"}, None),
    ({"suffix": "-test"}, None), ({"wildcard": "*ball"}, None),
    ([], "must not be an empty list"),
    ([{"prefix": "x"}], "[0]: must be a string or a number"),
    (None, "must be a string or a number"),
    ([1, 2e9], "[1]: must be a number between -1e9 and 1e9"),
    ({"equals": "x"}, "as an object it takes {\"prefix\": ...}, {\"suffix\": ...} or {\"wildcard\": ...}"),
    ({"prefix": "a", "suffix": "b"}, "as an object it takes {\"prefix\": ...}, {\"suffix\": ...} or "
                                     "{\"wildcard\": ...}"),
    ({"prefix": ""}, ".prefix: must be a non-empty string"),
    ({"wildcard": "**"}, ".wildcard: must be a pattern with at most 3 `*` (not two in a row; \\* for a literal "
                         "star), such as \"*.png\""),
])
def test_what_it_may_exclude(argument, problem):
    assert ANYTHING_BUT.problem(argument) == problem


@pytest.mark.parametrize("argument, value, expected", [
    (["rugby", "tennis"], "baseball", True), (["rugby", "tennis"], "rugby", False), ("rugby", "football", True),
    ([100, 500], 100, False), ([100, 500], 100.000001, False), ([100, 500], 101, True), ([1], True, True),
    (["1"], 1, True), ("x", None, False), ({"prefix": "order-"}, "data-entry", True),
    ({"prefix": "order-"}, "order-cancelled", False), ({"suffix": "-test"}, "order-test", False),
    ({"suffix": "-test"}, 5, True), ({"wildcard": "*ball"}, "baseball", False), ({"wildcard": "*ball"}, "rugby", True),
    ({"prefix": "a"}, None, False),
])
def test_meaning_for_one_value(argument, value, expected):
    assert ANYTHING_BUT.one(argument, value) is expected
    assert ANYTHING_BUT.any_in(argument, Index([value])) is expected


@pytest.mark.parametrize("argument, values, expected", [
    (["a", "b"], ["a", "b", None], False), (["a", "b"], ["a", "c"], True), ({"prefix": "x"}, ["xa", "xb"], False),
    ({"prefix": "x"}, ["xa", 1], True), ({"suffix": "x"}, ["ax", "bx"], False), ({"suffix": "x"}, ["ax", "b"], True),
    ({"wildcard": "x*"}, ["xa", "xb"], False), ({"wildcard": "x*"}, ["xa", "b"], True), ("a", [None], False),
])
def test_any_of_many_values_one_is_not_excluded(argument, values, expected):
    assert ANYTHING_BUT.any_in(argument, Index(values)) is expected
    assert any(ANYTHING_BUT.one(argument, value) for value in values) is expected

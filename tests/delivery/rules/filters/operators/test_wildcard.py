"""wildcard (pure): patterns of at most three `*`, matched without backtracking; against many values, only the
candidates its anchored ends allow."""

import pytest

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.wildcard import WILDCARD, wildcard_matches, wildcard_pieces

REFUSED = "must be a pattern with at most 3 `*` (not two in a row; \\* for a literal star), such as \"*.png\""


@pytest.mark.parametrize("pattern, pieces", [
    ("*.png", ("", ".png")), ("img-*.png", ("img-", ".png")), ("a*b*c*d", ("a", "b", "c", "d")),
    ("exact", ("exact",)), ("*", ("", "")), ("a\\*b", ("a*b",)), ("a\\\\*", ("a\\", "")),
    ("**a", None), ("a*b*c*d*e", None), ("a\\x", None), ("a\\", None), ("", None),
])
def test_a_patterns_pieces(pattern, pieces):
    assert wildcard_pieces(pattern) == pieces
    assert WILDCARD.problem(pattern) == (None if pieces else REFUSED)


def test_only_strings_are_patterns():
    assert WILDCARD.problem(5) == REFUSED


@pytest.mark.parametrize("pieces, text, expected", [
    (("", ".png"), "cat.png", True), (("", ".png"), "png", False), (("a", "a"), "a", False), (("a", "a"), "aa", True),
    (("", "ab", "ab", ""), "xabyab", True), (("", "ab", "ab", ""), "xaby", False), (("x",), "x", True),
    (("x",), "xx", False),
])
def test_matching_without_backtracking(pieces, text, expected):
    assert wildcard_matches(pieces, text) is expected


@pytest.mark.parametrize("pattern, expected", [
    ("img-*.png", True), ("img-*.gif", False), ("*.png", True), ("*-2*", True), ("*-3*", False), ("*", True),
    ("doc*", False), ("*\\*", True),
])
def test_any_of_many_values(pattern, expected):
    values = ["img-1.png", "img-2.jpg", "a*", 3, None]
    assert WILDCARD.any_in(pattern, Index(values)) is expected
    assert any(WILDCARD.one(pattern, value) for value in values) is expected

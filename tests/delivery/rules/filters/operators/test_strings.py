"""prefix, suffix and equals-ignore-case (pure): strings only, never numbers."""

import pytest

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.strings import EqualsIgnoreCase, Prefix, Suffix

PREFIX, SUFFIX, EQUALS = Prefix(), Suffix(), EqualsIgnoreCase()


@pytest.mark.parametrize("op", [PREFIX, SUFFIX, EQUALS], ids=lambda op: op.name)
def test_each_takes_a_non_empty_string(op):
    assert op.problem("a") is None
    assert op.problem("") == "must be a non-empty string"
    assert op.problem(["a"]) == "must be a non-empty string"


@pytest.mark.parametrize("op, argument, value, expected", [
    (PREFIX, "bas", "baseball", True), (PREFIX, "bas", "basketball", True), (PREFIX, "bas", "rugby", False),
    (PREFIX, "bas", "ba", False), (PREFIX, "1", 10, False),
    (SUFFIX, "ball", "baseball", True), (SUFFIX, "ball", "rugby", False), (SUFFIX, "ball", "all", False),
    (SUFFIX, "0", 10, False),
    (EQUALS, "tennis", "TENNIS", True), (EQUALS, "tennis", "Tennis", True), (EQUALS, "straße", "STRASSE", True),
    (EQUALS, "tennis", "baseball", False), (EQUALS, "1", 1, False),
])
def test_meaning_for_one_value_and_for_many(op, argument, value, expected):
    assert op.one(argument, value) is expected
    assert op.any_in(argument, Index([value])) is expected
    assert op.any_in(argument, Index(["zzz", value, "yyy", 7])) is expected

"""One condition of a filter policy (pure): its operator, what is wrong with it, and whether a key's conditions
hold, asked one by one or through the values' index, with the same answers."""

import itertools

import pytest

from delivery.rules.filters.conditions import (
    EXACT,
    OPERATORS,
    condition_problem,
    holds_indexed,
    holds_one_by_one,
    operator_of,
    prepared,
    wildcard_count,
)
from delivery.rules.filters.index import Index


def test_operators_by_their_sns_names():
    assert sorted(OPERATORS) == ["anything-but", "cidr", "equals-ignore-case", "exists", "numeric", "prefix",
                                 "suffix", "wildcard"]
    assert all(op.name == name for name, op in OPERATORS.items())
    assert operator_of({"prefix": "eu-"}) == (OPERATORS["prefix"], "eu-")
    assert operator_of("eu") == (EXACT, "eu")
    assert operator_of(None) == (EXACT, None)


@pytest.mark.parametrize("condition, problem", [
    ("eu", None),
    ({"numeric": [">", 0, "<=", 150]}, None),
    ({"regex": "."}, 'unknown operator {"regex": "."}; known: prefix, suffix, equals-ignore-case, exists, numeric, '
                     "cidr, wildcard, anything-but"),
    ({"prefix": "a", "suffix": "b"}, 'unknown operator {"prefix": "a", "suffix": "b"}; known: prefix, suffix, '
                                     "equals-ignore-case, exists, numeric, cidr, wildcard, anything-but"),
    ({"prefix": ""}, ".prefix: must be a non-empty string"),
    ({"numeric": ["~", 1]}, ".numeric[0]: unknown operator '~'; use one of =, <, <=, >, >="),
    ({"anything-but": {"prefix": ""}}, ".anything-but.prefix: must be a non-empty string"),
    ([1], "must be a string, a number, true, false, null or an operator object such as {\"prefix\": \"a\"}"),
])
def test_a_conditions_problem_names_its_part(condition, problem):
    assert condition_problem(condition) == problem


@pytest.mark.parametrize("condition, count", [
    ({"wildcard": "*.png"}, 1), ({"anything-but": {"wildcard": "*.png"}}, 1), ({"anything-but": {"prefix": "a"}}, 0),
    ({"prefix": "*"}, 0), ("*", 0), ({"wildcard": "a", "prefix": "b"}, 0),
])
def test_wildcard_count(condition, count):
    assert wildcard_count(condition) == count


def test_a_condition_no_operator_takes_any_more_holds_for_none():
    """A stored policy from before a rule: the condition is left out or holds for nothing; the publish goes on."""
    assert prepared([{"regex": "."}, "a"]) == [(EXACT, "a")]
    unaskable = [{"regex": "."}, {"prefix": 5}, {"cidr": "10.0.0.0/33"}]
    assert holds_one_by_one(unaskable, ["a", "10.0.0.1", 1]) is False
    assert holds_indexed(unaskable, Index(["a", "10.0.0.1", 1])) is False
    assert holds_one_by_one([*unaskable, "a"], ["a"]) is True
    assert holds_indexed([*unaskable, "a"], Index(["a"])) is True


def test_an_absent_key_matches_exists_false_only_when_absence_counts():
    for holds in (holds_one_by_one, lambda conditions, values, *rest: holds_indexed(conditions, Index(values), *rest)):
        assert holds([{"exists": False}], []) is True
        assert holds([{"exists": False}], [], False) is False  # a message without attributes
        assert holds([{"exists": False}], [None]) is True  # null is no value
        assert holds([{"exists": True}], ["a"], False) is True


POOL = [None, True, False, 0, 1, 1.5, 1.000001, -3, 100, "a", "A", "ab", "abc", "b", "ba", "cab", "10.0.0.1",
        "10.1.2.3", "192.168.1.1", "::1", "fe80::1", "x", ""]
RULE_POOL = [None, 0, 1, 1.5, "a", "ab", True, False, {"prefix": "a"}, {"prefix": "ab"}, {"suffix": "b"},
             {"suffix": "ab"}, {"equals-ignore-case": "AB"}, {"exists": True}, {"exists": False},
             {"numeric": [">", 0]}, {"numeric": [">=", 1, "<", 100]}, {"numeric": ["=", 1.5]},
             {"numeric": ["<=", -3]}, {"numeric": [">", 1, "<=", 1.5]}, {"cidr": "10.0.0.0/8"},
             {"cidr": "10.1.0.0/16"}, {"cidr": "fe80::/10"}, {"anything-but": ["a", 1]}, {"anything-but": "ab"},
             {"anything-but": [0, "b"]}, {"anything-but": 1.5}, {"anything-but": {"prefix": "a"}},
             {"anything-but": {"prefix": "ab"}}, {"anything-but": {"prefix": "b"}},
             {"anything-but": {"suffix": "b"}}, {"anything-but": {"suffix": "ab"}}, {"wildcard": "*b"},
             {"wildcard": "a*"}, {"wildcard": "*a*"}, {"wildcard": "a*b*c"}, {"wildcard": "*"},
             {"anything-but": {"wildcard": "*b"}}, {"anything-but": {"wildcard": "a*"}}]


def test_compiled_conditions_mean_what_each_condition_means():
    """Every single condition and pair and every other triple from the pool against no value, every leaf value
    (strings, numbers, true, false, null), pairs and triples of them (an array): asking the values' index
    (`any_in`) answers as the conditions checked one by one (each operator's `one`)."""
    value_sets = ([[]] + [[v] for v in POOL] + [list(pair) for pair in itertools.combinations(POOL, 2)][::11]
                  + [list(triple) for triple in itertools.combinations(POOL, 3)][::211])
    checked = 0
    for size in (1, 2, 3):
        for n, conditions in enumerate(itertools.combinations(RULE_POOL, size)):
            if size == 3 and n % 2:
                continue  # every other triple: each condition still meets every other in a pair
            conditions = list(conditions)
            for values in value_sets:
                expected = holds_one_by_one(conditions, values)
                indexed = holds_indexed(conditions, Index(values))
                assert indexed is expected, (conditions, values)
                checked += 1
    assert checked > 100_000

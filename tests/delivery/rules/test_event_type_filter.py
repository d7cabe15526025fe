"""Event-type filters (pure): a subscription's list of event types, exact or with `*`, matched without
backtracking."""

import pytest

from delivery.rules import event_type_filter
from delivery.rules.event_type_filter import event_type_matches, validate_event_types
from delivery.rules.filters.errors import FilterPolicyError


@pytest.mark.parametrize("patterns, event_type, expected", [
    ([], "anything", True),
    (["order.created"], "order.created", True),
    (["order.created"], "order.updated", False),
    (["order.*"], "order.created", True),
    (["order.*"], "order.item.added", True),
    (["order.*"], "order", False),
    (["order.*"], "orders.created", False),
    (["*.deleted"], "customer.deleted", True),
    (["invoice.paid", "order.*"], "invoice.paid", True),
    (["a+b.*"], "a+b.c", True),  # only * is special
    (["a+b.*"], "aab.c", False),
])
def test_event_type_filters(patterns, event_type, expected):
    validate_event_types(patterns)
    assert event_type_matches(patterns, event_type) is expected


@pytest.mark.parametrize("patterns, named", [
    ("order.*", "must be a list"), ([""], "[0]: must be an event type"), (["a b"], "[0]: must not contain spaces"),
    (["x"] * 26, "at most 25"), ([3], "[0]: must be an event type"),
])
def test_invalid_event_type_filters(patterns, named):
    with pytest.raises(FilterPolicyError) as caught:
        validate_event_types(patterns)
    assert named in str(caught.value)


def test_wildcards_match_without_backtracking():
    # The worst the limits allow; a regular expression backtracks for hours on it (the figures: docs/filtering.md).
    pattern = "*a" * 20 + "*b"
    assert not event_type_matches([pattern], "a" * 256)
    assert event_type_matches([pattern], "a" * 255 + "b")


@pytest.mark.parametrize("pattern,text,expected", [
    ("order.*", "order.created", True), ("order.*", "order.", True), ("order.*", "orders", False),
    ("*.created", "order.created", True), ("*", "", True), ("a*b*c", "abc", True), ("a*b*c", "acb", False),
    ("a*a", "a", False), ("a*a", "aa", True), ("*ab*ab*", "xabyab", True), ("*ab*ab*", "xaby", False),
    ("a**b", "ab", True), ("exact", "exact", True), ("exact", "exactly", False),
])
def test_wildcards_mean_what_they_meant(pattern, text, expected):
    assert event_type_filter.glob_matches(pattern, text) is expected

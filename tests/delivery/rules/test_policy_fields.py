"""Reading a delivery policy's fields (pure): every error kept with its field path, the default answered for a
field in error, so that one pass reports them all."""

import pytest

from delivery.rules.policy_fields import Checker


def test_a_section_is_an_object_of_known_fields():
    check = Checker()
    assert check.section({"requestPolicy": {"timeoutSeconds": 5, "retries": 1, "a": 2}}, "requestPolicy",
                         ("timeoutSeconds",)) == {"timeoutSeconds": 5, "retries": 1, "a": 2}
    assert check.section({"requestPolicy": [1]}, "requestPolicy", ("timeoutSeconds",)) == {}
    assert check.section({}, "requestPolicy", ("timeoutSeconds",)) == {}  # absent: empty
    assert check.errors == [("requestPolicy.a", "unknown field"), ("requestPolicy.retries", "unknown field"),
                            ("requestPolicy", "must be an object")]


@pytest.mark.parametrize("value, answer, errors", [
    (5, 5, []),
    (5.0, 5, []),  # a whole float is a whole number
    (5.5, 3, [("p.k", "must be a whole number")]),
    (True, 3, [("p.k", "must be a whole number")]),
    ("5", 3, [("p.k", "must be a whole number")]),
    (0, 0, [("p.k", "must be at least 1")]),
    (101, 101, [("p.k", "must be at most 100")]),
    (None, 3, [("p.k", "must not be null")]),
])
def test_integer(value, answer, errors):
    check = Checker()
    assert check.integer({"k": value}, "p", "k", 3, 1, 100) == answer
    assert check.errors == errors


@pytest.mark.parametrize("value, answer, errors", [
    (0.5, 0.5, []),
    (float("inf"), 0, [("jitter", "must be a number")]),
    (float("nan"), 0, [("jitter", "must be a number")]),
    (False, 0, [("jitter", "must be a number")]),
    (0.6, 0.6, [("jitter", "must be at most 0.5")]),
])
def test_number_at_the_top_level(value, answer, errors):
    check = Checker()
    assert check.number({"jitter": value}, "", "jitter", 0, 0, 0.5) == answer
    assert check.errors == errors


def test_null_is_not_set_only_where_not_setting_is_allowed():
    check = Checker()
    assert check.integer({"maxAttempts": None}, "retryLimits", "maxAttempts", None, 1, 1000) is None
    assert check.number({}, "retryLimits", "maxAgeSeconds", None, 1) is None
    assert check.errors == []


def test_every_error_is_kept_in_order():
    check = Checker()
    check.integer({"a": "x"}, "s", "a", 1)
    check.number({"b": -1}, "s", "b", 1, 0)
    check.fail("s", "a rule across fields")
    assert check.errors == [("s.a", "must be a whole number"), ("s.b", "must be at least 0"),
                            ("s", "a rule across fields")]

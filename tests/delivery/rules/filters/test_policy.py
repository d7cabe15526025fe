"""What the rest of Herald asks of a subscription's filters (pure): is a policy one SNS accepts, naming the
offending part, and what is wrong with a subscription's filters, by field."""

import pytest

from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.policy import problems, validate


@pytest.mark.parametrize("policy, scope, named", [
    ([1], "MessageAttributes", "must be an object"),
    ({"a": []}, "MessageAttributes", "a: must be a non-empty list"),
    ({"a": "x"}, "MessageAttributes", "a: must be a non-empty list"),
    ({"a": [{"regex": "."}]}, "MessageAttributes", "a[0]: unknown operator"),
    ({"a": ["x", {"numeric": [">"]}]}, "MessageAttributes", "a[1].numeric: must be one or two comparisons"),
    ({"a": [{"numeric": ["~", 1]}]}, "MessageAttributes", "a[0].numeric[0]: unknown operator"),
    ({"a": [{"numeric": [">", 2e9]}]}, "MessageAttributes", "a[0].numeric[1]: must be a number between"),
    ({"a": [{"numeric": ["<", 5, ">", 1]}]}, "MessageAttributes", "a[0].numeric: a range is a lower bound"),
    ({"a": [{"numeric": [">", 5, "<", 1]}]}, "MessageAttributes", "lower bound 5 is not below"),
    ({"a": [[1]]}, "MessageAttributes", "a[0]: must be a string, a number, true, false, null"),
    ({"a": [1e10]}, "MessageAttributes", "a[0]: must be a number between -1e9 and 1e9"),
    ({"a": [{"prefix": ""}]}, "MessageAttributes", "a[0].prefix: must be a non-empty string"),
    ({"a": [{"suffix": 3}]}, "MessageAttributes", "a[0].suffix: must be a non-empty string"),
    ({"a": [{"equals-ignore-case": ["x"]}]}, "MessageAttributes", "a[0].equals-ignore-case"),
    ({"a": [{"exists": "yes"}]}, "MessageAttributes", "a[0].exists: must be true or false"),
    ({"a": [{"cidr": "10.0.0.0/33"}]}, "MessageAttributes", "a[0].cidr: must be an IP network"),
    ({"a": [{"anything-but": []}]}, "MessageAttributes", "a[0].anything-but: must not be an empty list"),
    ({"a": [{"anything-but": {"equals": "x"}}]}, "MessageAttributes", "a[0].anything-but: as an object"),
    ({"a": [{"anything-but": [{"prefix": "x"}]}]}, "MessageAttributes", "a[0].anything-but[0]: must be a string"),
    ({"a": {"b": ["x"]}}, "MessageAttributes", "a: filter policy scope MessageAttributes does not support nested"),
    ({"$or": [{"a": ["x"]}]}, "MessageAttributes", "$or: must be a list of at least two policy objects"),
    ({"$or": [{"a": ["x"]}, {"b": [{"prefix": 1}]}]}, "MessageAttributes", "$or[1].b[0].prefix"),
    ({"a": {"b": {}}}, "MessageBody", "a.b: must not be empty"),
    ({"a": ["x"]}, "Body", "filter_policy_scope must be one of"),
    ({"a": ["x"], "b": ["x"], "c": ["x"], "d": ["x"], "e": ["x"], "f": ["x"]}, "MessageAttributes",
     "has 6 keys (a, b, c, d, e, f); at most 5"),
    ({"a": ["x"], "$or": [{"b": ["x"], "c": ["x"]}, {"d": ["x"], "e": ["x"], "f": ["x"]}]}, "MessageAttributes",
     "has 6 keys"),
    ({"a": {"b": ["x"], "c": ["x"]}, "d": {"e": ["x"], "f": {"g": ["x"]}}, "h": ["x"], "i": ["x"]}, "MessageBody",
     "has 6 keys (a.b, a.c, d.e, d.f.g, h, i)"),
    ({"a": list("abcdefgh"), "b": list("abcdefgh"), "c": list("abc")}, "MessageAttributes",
     "has 192 combinations (a 8 × b 8 × c 3); at most 150"),
])
def test_invalid_policies_name_the_offending_part(policy, scope, named):
    with pytest.raises(FilterPolicyError) as caught:
        validate(policy, scope)
    assert named in str(caught.value)


@pytest.mark.parametrize("policy", [None, {}])
def test_no_policy_is_a_valid_policy(policy):
    validate(policy)
    validate(policy, "MessageBody")


def test_problems_by_field_for_every_door():
    assert problems(policy={"a": ["x"]}, event_types=["order.*"]) == {}
    assert problems(policy={"a": []}, event_types=["a b"]) == {
        "filter_policy": "a: must be a non-empty list of conditions",
        "event_types": "[0]: must not contain spaces or control characters"}
    assert problems(policy={"a": {"b": ["x"]}}) == {
        "filter_policy": "a: filter policy scope MessageAttributes does not support nested filter policy (nested "
                         "keys need filter_policy_scope MessageBody)"}
    assert problems(policy={"a": {"b": ["x"]}}, scope="MessageBody") == {}
    assert problems(scope="Body") == {"filter_policy": "filter_policy_scope must be one of MessageAttributes, "
                                                       "MessageBody"}

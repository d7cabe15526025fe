"""SNS's limits on a filter policy, as SNS counts them (pure): keys, combinations, size; and Herald's bound on
wildcard conditions."""

import pytest

from delivery.rules.filters import limits
from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.limits import check, check_size, combinations, leaf_keys
from delivery.rules.filters.policy import validate
from delivery.rules.filters.reading import shape


def test_combinations_as_sns_counts_them():
    # SNS: 3 × 1 × 2 = 6
    assert combinations({"key_a": ["value_one", "value_two", "value_three"], "key_b": ["value_one"],
                         "key_c": ["value_one", "value_two"]}) == 6
    # $or branches add up: 1 × (2 + 1 × (2 + 3)) = 7
    assert combinations({"source": ["aws.cloudwatch"], "$or": [
        {"metricName": ["CPUUtilization", "ReadLatency"]},
        {"metricType": ["MetricType"], "$or": [{"metricId": [1234, 4321]}, {"spaceId": [1000, 2000, 3000]}]}]}) == 7
    validate({"a": list("abcdefghij"), "b": list("abcdefghijklmno")})  # exactly 150 is allowed


def test_leaf_keys_are_dotted_paths_across_nesting_and_or_branches():
    policy = {"a": {"b": ["x"], "c.d": ["x"]}, "$or": [{"e": ["x"]}, {"a": {"b": ["y"]}}]}
    assert leaf_keys(policy) == {"a.b", "a.c.d", "e"}
    assert leaf_keys({"a.b": ["x"]}, "MessageAttributes") == {"a.b"}  # an attribute's name is one key


def test_a_policy_is_at_most_256_kib_of_json():
    check_size({"a": ["x" * (limits.MAX_POLICY_BYTES - 11)]})  # {"a": [""]} is 11 bytes: exactly 256 KiB
    with pytest.raises(FilterPolicyError, match="^is larger than 256 KiB$"):
        check_size({"a": ["x" * (limits.MAX_POLICY_BYTES - 10)]})
    with pytest.raises(FilterPolicyError, match="^must be JSON: an object of keys"):
        check_size({"a": [object()]})


@pytest.mark.parametrize("policy, refusal", [
    ({k: ["x"] for k in "abcdef"}, "has 6 keys (a, b, c, d, e, f); at most 5 are allowed"),
    ({"a": [{"wildcard": f"*{n}"} for n in range(4)] + [{"anything-but": {"wildcard": "*x"}}] * 2},
     "has 6 wildcard conditions; at most 5 are allowed (each is matched against every string of a value, so their "
     "number is bounded)"),
    ({"a": {"b": list("abcdefgh")}, "c": list("abcdefghij")},
     "has 160 combinations (a.… 16 × c 10); at most 150 are allowed (SNS counts each key's conditions times its "
     "depth)"),
])
def test_each_limit_says_what_it_counted(policy, refusal):
    with pytest.raises(FilterPolicyError) as refused:
        check(shape(policy, "MessageBody"))
    assert str(refused.value) == refusal


def test_at_the_limits_a_policy_passes():
    check(shape({k: ["x"] for k in "abcde"}, "MessageBody"))
    check(shape({"a": [{"wildcard": f"*{n}"} for n in range(5)]}, "MessageBody"))
    check(shape({"a": {"b": list("abcdefgh")}, "c": list("abcdefghi")}, "MessageBody"))  # 16 × 9 = 144

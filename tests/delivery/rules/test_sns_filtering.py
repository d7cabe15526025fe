"""Amazon SNS message filtering, case by case: each case cites the AWS documentation page it comes from (and, where
one exists, a case recorded against SNS itself), so that a policy that works on SNS works on Herald. Where Herald
differs on purpose, docs/filtering.md ("Differences from SNS") says so, and the case below names it."""

import pytest

from delivery.rules.filters.policy import (
    BODY,
    FilterPolicyError,
    body_of,
    combinations,
    explain,
    failing_key,
    matches,
    validate,
)

AWS = "https://docs.aws.amazon.com/sns/latest/dg/"
CONSTRAINTS = AWS + "subscription-filter-policy-constraints.html"
STRINGS = AWS + "string-value-matching.html"
NUMBERS = AWS + "numeric-value-matching.html"
KEYS = AWS + "attribute-key-matching.html"
AND_OR = AWS + "and-or-logic.html"
ATTRIBUTES = AWS + "sns-message-attributes.html"
FILTERING = AWS + "sns-message-filtering.html"


def body_matches(policy, body) -> bool:
    validate(policy, BODY)
    return matches(policy, {}, scope=BODY, body=body)


def attributes_match(policy, attributes) -> bool:
    validate(policy)
    return matches(policy, attributes)


# --- MessageBody: dotted keys are paths, in the policy and in the payload (FILTERING, payload-based filtering) ----

@pytest.mark.parametrize("body, expected", [
    ({"object": {"nested": "string.value"}}, True),
    ({"object.nested": "string.value"}, True),  # the payload's own dotted key is the same path
    ({"object": {"nested": "test-auto"}}, False),
    ({"object": [{"nested": "string.value"}]}, True),
])
def test_a_dotted_policy_key_is_a_path(body, expected):
    assert body_matches({"object.nested": ["string.value"]}, body) is expected


@pytest.mark.parametrize("body", [
    {"object": {"nested": {"test": "string.value"}}}, {"object.nested.test": "string.value"},
    {"object.nested": {"test": "string.value"}}, {"object": {"nested.test": "string.value"}},
])
def test_every_spelling_of_a_path_matches(body):
    assert body_matches({"object.nested.test": ["string.value"]}, body)
    assert body_matches({"object": {"nested": {"test": ["string.value"]}}}, body)


def test_a_dotted_key_failing_is_explained_on_its_path_not_as_a_changed_policy():
    policy = {"object.nested": ["string.value"]}
    body = {"object": {"nested": "other"}}
    key = failing_key(policy, {}, scope=BODY, body=body)
    assert key == "object.nested"
    assert explain(policy, {}, key, scope=BODY, body=body) == (
        """body key 'object.nested' is "other", which meets none of ["string.value"]""")


# --- arrays: any element, at any depth (FILTERING; a case recorded against SNS: S3 event records) -----------------

S3_POLICY = {"Records": {"s3": {"object": {"key": [{"prefix": "auto-"}]}}, "eventName": [{"prefix": "ObjectCreated:"}]}}


@pytest.mark.parametrize("records, expected", [
    ([{"eventName": "ObjectCreated:Put", "s3": {"object": [[{"key": "auto-insurance-2314.xml"}]]}}], True),
    ([{"eventName": "ObjectCreated:Put", "s3": {"object": {"key": "auto-insurance-2314.xml"}}}], True),
    ([{"eventName": "ObjectRemoved:Delete", "s3": {"object": {"key": "auto-insurance-2314.xml"}}}], False),
    ([{"eventName": "ObjectCreated:Put", "s3": {"object": {"key": "home-insurance-2314.xml"}}}], False),
])
def test_objects_inside_arrays_of_arrays_are_reached(records, expected):
    assert body_matches(S3_POLICY, {"Records": records}) is expected


def test_a_leaf_array_matches_when_one_element_does():
    policy = {"headers": {"route-to": ["queue1"]}}
    assert body_matches(policy, {"headers": {"route-to": ["queue1"]}})
    assert body_matches(policy, {"headers": {"route-to": ["queue1", "queue2"]}})
    assert not body_matches(policy, {"headers": {"route-to": ["queue3"]}})
    assert body_matches({"grid": [1]}, {"grid": [[0, 0], [0, [1]]]})  # arrays of arrays of values too


# --- null, true and false as values (CONSTRAINTS: "the keywords true, false, and null") ----------------------------

@pytest.mark.parametrize("policy, body, expected", [
    ({"coupon": [None]}, {"coupon": None}, True),
    ({"coupon": [None]}, {}, False),  # null is a value: a missing key is not null
    ({"coupon": [None]}, {"coupon": "SAVE10"}, False),
    ({"gift": [True]}, {"gift": True}, True),
    ({"gift": [True]}, {"gift": 1}, False),  # true is not 1
    ({"gift": [1]}, {"gift": True}, False),
    ({"gift": [False]}, {"gift": False}, True),
    ({"gift": [False]}, {"gift": 0}, False),
    ({"gift": [False, None]}, {"gift": [True, None]}, True),
])
def test_null_true_and_false_in_the_body(policy, body, expected):
    assert body_matches(policy, body) is expected


def test_null_true_and_false_in_attributes():
    """Accepted in the attribute scope too; an attribute holds them as elements of a String.Array."""
    assert attributes_match({"flags": [True]}, {"flags": ["a", True]})
    assert attributes_match({"flags": [None]}, {"flags": ["a", None]})
    assert not attributes_match({"flags": [None]}, {})  # recorded: [null] does not match a missing attribute
    assert not attributes_match({"flags": [False]}, {"flags": ["false"]})  # the string is no boolean


# --- complexity along paths (CONSTRAINTS, payload-based filtering) ----------------------------------------------

def test_complexity_multiplies_each_keys_values_by_its_depth():
    # the documentation's example: 3 x 4 x 2 x 3 = 72
    assert combinations({"key_a": {"key_b": {"key_c": ["v1", "v2", "v3", "v4"]}},
                         "key_d": {"key_e": ["v1", "v2", "v3"]}}) == 72
    # the same with a third, flat key: (4·3)(3·2)(3·1) = 216, refused by SNS (recorded)
    policy = {"key_a": {"key_b": {"key_c": ["v1", "v2", "v3", "v4"]}}, "key_d": {"key_e": ["v1", "v2", "v3"]},
              "key_f": ["v1", "v2", "v3"]}
    assert combinations(policy) == 216
    with pytest.raises(FilterPolicyError, match="has 216 combinations .*at most 150"):
        validate(policy, BODY)
    assert combinations({"key_a.key_b.key_c": ["v1", "v2", "v3", "v4"]}) == 12  # a dotted key is as deep


def test_a_nested_or_counts_along_its_path():
    # 5 · (2·2) · (1·2 + 3·2) = 160, refused by SNS (recorded); counted without depth it was 40
    policy = {"source": list("abcde"), "detail": {"scope": ["x", "y"], "$or": [{"type": ["t"]},
                                                                              {"name": ["n1", "n2", "n3"]}]}}
    assert combinations(policy) == 160
    with pytest.raises(FilterPolicyError, match="has 160 combinations"):
        validate(policy, BODY)
    # flat $or branches add up (AND_OR): 1 × (2 + 1 × (2 + 3)) = 7
    assert combinations({"source": ["aws.cloudwatch"], "$or": [
        {"metricName": ["CPUUtilization", "ReadLatency"]},
        {"metricType": ["MetricType"], "$or": [{"metricId": [1234, 4321]}, {"spaceId": [1000, 2000, 3000]}]}]}) == 7


def test_at_most_five_keys_and_150_combinations():
    with pytest.raises(FilterPolicyError, match="has 6 keys"):
        validate({k: ["x"] for k in "abcdef"})
    validate({"a": list(range(10)), "b": list(range(15))})  # 150: accepted
    with pytest.raises(FilterPolicyError, match="has 151 combinations"):
        validate({"a": list(range(151))})


# --- numbers: five digits after the decimal point, within ±10^9 (CONSTRAINTS, NUMBERS) ---------------------------

@pytest.mark.parametrize("policy, value, expected", [
    ({"price": [100.123456789]}, 100.1234567, True),
    ({"price": [100.12345]}, 100.12346, False),
    ({"price": [{"numeric": ["=", 100.000001]}]}, 100, True),
    ({"price": [{"numeric": [">", 100]}]}, 100.000001, False),  # the same number to five digits
    ({"price": [{"numeric": [">", 100]}]}, 100.00001, True),
    ({"price": [{"anything-but": [100.0000001]}]}, 100, False),
    ({"price": [301.5]}, 301.5, True),
])
def test_numbers_compare_to_five_decimal_places(policy, value, expected):
    assert attributes_match(policy, {"price": value}) is expected
    assert body_matches(policy, {"price": value}) is expected


@pytest.mark.parametrize("policy, named", [
    ({"n": [1_000_000_001]}, "n[0]: must be a number between -1e9 and 1e9"),
    ({"n": [-1e9 - 1]}, "n[0]: must be a number between"),
    ({"n": [{"anything-but": [5, 2e9]}]}, "n[0].anything-but[1]: must be a number between"),
    ({"n": [{"numeric": [">", 1e10]}]}, "n[0].numeric[1]: must be a number between"),
])
def test_every_number_of_a_policy_lies_within_a_billion(policy, named):
    with pytest.raises(FilterPolicyError) as refused:
        validate(policy)
    assert named in str(refused.value)
    validate({"n": [1e9, -1e9, {"numeric": [">=", -1e9, "<=", 1e9]}]})


# --- attributes with SNS's data types (ATTRIBUTES) ---------------------------------------------------------------

@pytest.mark.parametrize("policy, value, expected", [
    ({"store": ["value1"]}, ["value1", "value2"], True),  # recorded: String.Array, one element matches
    ({"store": ["value1"]}, ["value2", "value3"], False),
    ({"store": [{"prefix": "val"}]}, ["x", "value2"], True),
    ({"store": [{"exists": True}]}, ["x"], True),
    ({"store": [{"exists": True}]}, [], False),  # an empty array holds no value
    ({"store": [{"anything-but": ["rugby", "tennis"]}]}, ["rugby", "baseball"], True),  # STRINGS' example
    ({"store": [{"anything-but": ["rugby", "tennis"]}]}, ["rugby", "tennis"], False),
    ({"store": [{"numeric": [">", 0, "<=", 100]}]}, [150, 99], True),
    ({"price": [{"numeric": [">", 0, "<=", 100]}]}, 99, True),  # recorded: Number 99
    ({"price": [{"numeric": [">", 0, "<=", 100]}]}, 111, False),
    ({"price": [{"numeric": [">", 0]}]}, "99", False),  # a String attribute is no number
    ({"price": [99]}, "99", False),
])
def test_attribute_types_string_number_and_string_array(policy, value, expected):
    name = next(iter(policy))
    assert attributes_match(policy, {name: value}) is expected


# --- keys: exists (KEYS) -----------------------------------------------------------------------------------------

def test_exists_false_needs_a_message_with_attributes():
    """KEYS: `exists: false` matches a message that has attributes, none of them the key."""
    assert attributes_match({"store": [{"exists": False}]}, {"def": "x"})
    assert not attributes_match({"store": [{"exists": False}]}, {"store": "x"})
    assert not attributes_match({"store": [{"exists": False}]}, {})


def test_exists_is_about_leaves():
    """KEYS: exists applies to leaf values; an object, an empty array or a null is no value."""
    assert not body_matches({"store": [{"exists": True}]}, {"store": {"city": "Seattle"}})
    assert body_matches({"store": {"city": [{"exists": True}]}}, {"store": {"city": "Seattle"}})
    assert not body_matches({"tags": [{"exists": True}]}, {"tags": []})
    assert not body_matches({"coupon": [{"exists": True}]}, {"coupon": None})
    assert body_matches({"coupon": [{"exists": False}]}, {"coupon": None})


# --- $or (AND_OR) --------------------------------------------------------------------------------------------------

RECORDED_OR = {"$or": [{"metricName": ["CPUUtilization", "ReadLatency"]}, {"namespace": ["AWS/EC2", "AWS/ES"]}],
               "detail": {"scope": ["Service"], "$or": [{"source": ["aws.cloudwatch"]},
                                                        {"type": ["CloudWatch Alarm State Change"]}]}}


@pytest.mark.parametrize("body, expected", [
    ({"metricName": "CPUUtilization", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}, True),
    ({"namespace": "AWS/ES", "detail": {"scope": "Service", "type": "CloudWatch Alarm State Change"}}, True),
    ({"metricName": "DiskUsage", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}, False),
    ({"metricName": "CPUUtilization", "detail": {"scope": "Region", "source": "aws.cloudwatch"}}, False),
    ({"metricName": "CPUUtilization", "detail": {"scope": "Service", "source": "aws.ec2"}}, False),
])
def test_or_at_the_top_and_inside_a_nested_key(body, expected):
    assert body_matches(RECORDED_OR, body) is expected


def test_or_is_an_operator_only_over_two_policies_without_operator_keys():
    """AND_OR: otherwise `$or` is a key like any other."""
    not_an_or = {"$or": [{"prefix": "ab"}, {"suffix": "yz"}]}  # operator names: conditions of a key named $or
    assert attributes_match(not_an_or, {"$or": "abc"})
    assert not attributes_match(not_an_or, {"x": "abc"})
    with pytest.raises(FilterPolicyError, match=r"\$or\[0\]\.numeric"):
        validate({"$or": [{"numeric": 123}, {"prefix": "abc"}]})
    with pytest.raises(FilterPolicyError, match=r"\$or: must be a list of at least two policy objects"):
        validate({"$or": [{"a": ["x"]}]})


# --- string operators in both scopes (STRINGS) ---------------------------------------------------------------------

@pytest.mark.parametrize("condition, value, expected", [
    ("rugby", "rugby", True), ("rugby", "Rugby", False),
    ({"prefix": "bas"}, "baseball", True), ({"suffix": "ball"}, "baseball", True),
    ({"equals-ignore-case": "RUGBY"}, "rugby", True),
    ({"anything-but": "rugby"}, "tennis", True), ({"anything-but": "rugby"}, "rugby", False),
    ({"anything-but": {"prefix": "rug"}}, "rugby", False), ({"anything-but": {"prefix": "rug"}}, "tennis", True),
    ({"cidr": "10.0.0.0/24"}, "10.0.0.7", True), ({"cidr": "10.0.0.0/24"}, "10.0.1.7", False),
])
def test_each_operator_in_both_scopes(condition, value, expected):
    policy = {"k": [condition]}
    assert attributes_match(policy, {"k": value}) is expected
    assert attributes_match(policy, {"k": ["other", value]}) is (expected or condition == {"anything-but": "rugby"}
                                                                  or condition == {"anything-but": {"prefix": "rug"}})
    assert body_matches(policy, {"k": value}) is expected
    assert body_matches({"outer.k": [condition]}, {"outer": [{"k": value}]}) is expected


def test_a_stored_policy_from_before_a_rule_is_still_matched():
    """A policy written before a rule existed (an exact number over 1e9, an empty dotted step) is read as it is at
    publish time: it matches what it says, and a publish never fails on it."""
    assert matches({"n": [2e9]}, {"n": 2e9}) and not matches({"n": [2e9]}, {"n": 1})
    assert failing_key({"a..b": ["x"]}, {}, scope=BODY, body={"a": {"": {"b": "x"}}}) is None
    with pytest.raises(FilterPolicyError):
        validate({"n": [2e9]})


@pytest.mark.parametrize("policy_number, value, expected", [
    (0.00003, 0.000025, True), (0.00002, 0.000015, True), (0.00001, 0.000005, True), (0.00004, 0.000035, True),
    (0.00003, 0.000024999, False),
])
def test_five_decimals_round_half_up_on_the_decimal_text(policy_number, value, expected):
    assert matches({"n": [policy_number]}, {"n": value}) is expected


def test_numbers_of_any_size_in_a_message_never_break_a_match():
    huge = 10 ** 400
    assert not matches({"n": [{"numeric": [">", 0, "<", 10]}]}, {"n": 1e304})
    assert matches({"n": [{"numeric": [">", 0]}]}, {"n": huge})
    assert not body_matches({"n": [5]}, {"n": [huge, 1e304, -1e304]})
    assert body_matches({"n": [{"anything-but": [5]}]}, {"n": huge})
    with pytest.raises(FilterPolicyError, match="between -1e9 and 1e9"):
        validate({"n": [huge]})


def test_a_deep_text_payload_is_matched_without_recursing():
    deep = '{"a": ' + "[" * 5000 + '"x"' + "]" * 5000 + "}"
    assert body_matches({"a": ["x"]}, body_of(deep, True)) in (True, False)  # whatever json makes of it: no crash
    nested = {"a": ["x"]}
    for _ in range(3000):
        nested = {"a": [nested["a"]]}
    assert body_matches({"a": ["x"]}, nested)


def test_the_same_path_twice_is_refused_and_dotted_paths_count_their_depth():
    with pytest.raises(FilterPolicyError, match="a.b: the same path twice"):
        validate({"a": {"b": [1]}, "a.b": [2]}, BODY)
    with pytest.raises(FilterPolicyError, match="nested more than 10 levels deep"):
        validate({".".join("abcdefghijk"): ["x"]}, BODY)
    validate({".".join("abcdefghij"): ["x"]}, BODY)


def test_a_payloads_dotted_key_beside_the_nested_one_hides_neither():
    assert body_matches({"a.b": [1]}, {"a": {"b": 1}, "a.b": 2})
    assert body_matches({"a.b": [2]}, {"a": {"b": 1}, "a.b": 2})


# --- wildcard (STRINGS: wildcard, anything-but wildcard) ------------------------------------------------------------

@pytest.mark.parametrize("pattern, value, expected", [
    ("*ball", "baseball", True), ("*ball", "basketball", True), ("*ball", "rugby", False),
    ("base*", "baseball", True), ("b*e*l", "baseball", True), ("b*e*x", "baseball", False),
    ("*", "", True), ("a\\*b", "a*b", True), ("a\\*b", "axb", False), ("*a*a*b", "a" * 40, False),
])
def test_wildcard(pattern, value, expected):
    policy = {"k": [{"wildcard": pattern}]}
    assert attributes_match(policy, {"k": value}) is expected
    assert body_matches(policy, {"k": [value, 7]}) is expected


def test_anything_but_wildcard():
    """STRINGS' own example: it matches ["hockey", "rugby", "soccer"], not ["baseball", "basketball"]."""
    policy = {"customer_interests": [{"anything-but": {"wildcard": "*ball"}}]}
    assert attributes_match(policy, {"customer_interests": ["hockey", "rugby", "soccer"]})
    assert not attributes_match(policy, {"customer_interests": ["baseball", "basketball"]})


@pytest.mark.parametrize("pattern", ["**a", "a**", "*a*b*c*d", "a\\x", "", "a\\", 5])
def test_a_wildcard_sns_refuses_is_refused(pattern):
    with pytest.raises(FilterPolicyError, match=r"k\[0\]\.wildcard: must be a pattern with at most 3"):
        validate({"k": [{"wildcard": pattern}]})


def test_wildcards_are_bounded_per_policy():
    validate({"k": [{"wildcard": f"*{n}*"} for n in range(5)]})
    with pytest.raises(FilterPolicyError, match="has 6 wildcard conditions; at most 5"):
        validate({"k": [{"wildcard": f"*{n}*"} for n in range(5)], "j": [{"anything-but": {"wildcard": "a*"}}]})

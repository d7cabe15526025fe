"""The filter-policy rules (pure), case by case from the Amazon SNS documentation's examples."""

import itertools

import pytest

from delivery.rules import event_type_filter, filter_operators
from delivery.rules import filter_policy as filters
from delivery.rules.event_type_filter import event_type_matches, validate_event_types
from delivery.rules.filter_policy import (
    BODY,
    EVENT_TYPE_KEY,
    FilterPolicyError,
    body_of,
    combinations,
    explain,
    failing_key,
    matches,
    validate,
)


@pytest.mark.parametrize("policy, attributes, expected", [
    (None, {}, True),
    ({"region": ["eu", "us"]}, {"region": "eu"}, True),
    ({"region": ["eu"]}, {"region": "apac"}, False),
    ({"region": ["eu"]}, {}, False),
    ({"size": [3]}, {"size": 3}, True),
    ({"a": ["1"], "b": ["2"]}, {"a": "1", "b": "3"}, False),
    # exact matching: "customer_interests": ["rugby", "tennis"]
    ({"customer_interests": ["rugby", "tennis"]}, {"customer_interests": "rugby"}, True),
    ({"customer_interests": ["rugby", "tennis"]}, {"customer_interests": "baseball"}, False),
    ({"customer_interests": ["rugby", "tennis"]}, {"customer_interests": "Rugby"}, False),  # case-sensitive
    # numbers compare by value, strings are not numbers
    ({"price_usd": [301.5]}, {"price_usd": 3.015e2}, True),
    ({"size": [3]}, {"size": "3"}, False),
    ({"size": ["3"]}, {"size": 3}, False),
    # anything-but: a list, a single value, numbers, prefix and suffix
    ({"customer_interests": [{"anything-but": ["rugby", "tennis"]}]}, {"customer_interests": "baseball"}, True),
    ({"customer_interests": [{"anything-but": ["rugby", "tennis"]}]}, {"customer_interests": "rugby"}, False),
    ({"customer_interests": [{"anything-but": "rugby"}]}, {"customer_interests": "football"}, True),
    ({"customer_interests": [{"anything-but": "rugby"}]}, {"customer_interests": "rugby"}, False),
    ({"price": [{"anything-but": [100, 500]}]}, {"price": 100}, False),
    ({"price": [{"anything-but": [100, 500]}]}, {"price": 101}, True),
    ({"event": [{"anything-but": {"prefix": "order-"}}]}, {"event": "data-entry"}, True),
    ({"event": [{"anything-but": {"prefix": "order-"}}]}, {"event": "order-cancelled"}, False),
    ({"event": [{"anything-but": {"suffix": "-test"}}]}, {"event": "order-test"}, False),
    ({"event": [{"anything-but": {"suffix": "-test"}}]}, {"event": "order-live"}, True),
    ({"kind": [{"anything-but": ["test"]}]}, {}, False),  # anything-but needs the attribute
    # prefix, suffix, equals-ignore-case
    ({"customer_interests": [{"prefix": "bas"}]}, {"customer_interests": "baseball"}, True),
    ({"customer_interests": [{"prefix": "bas"}]}, {"customer_interests": "basketball"}, True),
    ({"customer_interests": [{"prefix": "bas"}]}, {"customer_interests": "rugby"}, False),
    ({"customer_interests": [{"suffix": "ball"}]}, {"customer_interests": "baseball"}, True),
    ({"customer_interests": [{"suffix": "ball"}]}, {"customer_interests": "rugby"}, False),
    ({"customer_interests": [{"equals-ignore-case": "tennis"}]}, {"customer_interests": "TENNIS"}, True),
    ({"customer_interests": [{"equals-ignore-case": "tennis"}]}, {"customer_interests": "Tennis"}, True),
    ({"customer_interests": [{"equals-ignore-case": "tennis"}]}, {"customer_interests": "baseball"}, False),
    ({"n": [{"prefix": "1"}]}, {"n": 10}, False),  # string rules never match numbers
    # numeric: exact, ranges and their bounds
    ({"price_usd": [{"numeric": ["=", 301.5]}]}, {"price_usd": 301.5}, True),
    ({"price_usd": [{"numeric": ["=", 301.5]}]}, {"price_usd": 300}, False),
    ({"price_usd": [{"numeric": [">", 0, "<=", 150]}]}, {"price_usd": 100}, True),
    ({"price_usd": [{"numeric": [">", 0, "<=", 150]}]}, {"price_usd": 150}, True),
    ({"price_usd": [{"numeric": [">", 0, "<=", 150]}]}, {"price_usd": 0}, False),
    ({"price_usd": [{"numeric": [">", 0, "<=", 150]}]}, {"price_usd": 150.001}, False),
    ({"price_usd": [{"numeric": ["<", 0]}]}, {"price_usd": -1}, True),
    ({"price_usd": [{"numeric": [">=", 0]}]}, {"price_usd": "5"}, False),
    # exists (key matching)
    ({"store": [{"exists": True}]}, {"store": "example_corp"}, True),
    ({"store": [{"exists": True}]}, {"event": "order_placed"}, False),
    ({"store": [{"exists": False}]}, {"event": "order_placed"}, True),
    ({"store": [{"exists": False}]}, {"store": "example_corp"}, False),
    # IP address matching
    ({"source_ip": [{"cidr": "10.0.0.0/24"}]}, {"source_ip": "10.0.0.0"}, True),
    ({"source_ip": [{"cidr": "10.0.0.0/24"}]}, {"source_ip": "10.0.0.255"}, True),
    ({"source_ip": [{"cidr": "10.0.0.0/24"}]}, {"source_ip": "10.1.1.0"}, False),
    ({"source_ip": [{"cidr": "10.0.0.0/24"}]}, {"source_ip": "not an address"}, False),
    ({"source_ip": [{"cidr": "2001:db8::/32"}]}, {"source_ip": "2001:db8::1"}, True),
    ({"source_ip": [{"cidr": "2001:db8::/32"}]}, {"source_ip": "10.0.0.1"}, False),
    # AND across keys, OR within a key's list
    ({"customer_interests": ["rugby"], "price_usd": [{"numeric": [">", 100]}]},
     {"customer_interests": "rugby", "price_usd": 150}, True),
    ({"customer_interests": ["rugby"], "price_usd": [{"numeric": [">", 100]}]},
     {"customer_interests": "rugby", "price_usd": 50}, False),
    ({"customer_interests": ["rugby", {"prefix": "bas"}]}, {"customer_interests": "basketball"}, True),
    # $or
    ({"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}]},
     {"source": "aws.cloudwatch", "namespace": "AWS/EC2"}, True),
    ({"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}]},
     {"source": "aws.cloudwatch", "metricName": "CPUUtilization"}, True),
    ({"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}]},
     {"source": "aws.cloudwatch", "namespace": "AWS/RDS"}, False),
    ({"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}]},
     {"source": "aws.ec2", "namespace": "AWS/EC2"}, False),
])
def test_attribute_scope(policy, attributes, expected):
    validate(policy)
    assert matches(policy, attributes) is expected


ORDER = {"customer_interests": ["basketball", "rugby"], "price_usd": 120, "store": {"city": "Seattle", "id": 7},
         "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-9", "qty": 1}], "coupon": None,
         "tags": ["gift", "express"]}


@pytest.mark.parametrize("policy, expected", [
    ({"customer_interests": ["rugby"]}, True),  # a body array matches when one element does
    ({"customer_interests": ["tennis"]}, False),
    ({"price_usd": [{"numeric": [">=", 100, "<", 200]}]}, True),
    ({"store": {"city": ["Seattle"]}}, True),
    ({"store": {"city": ["Portland"]}}, False),
    ({"store": {"city": [{"prefix": "Sea"}], "id": [7]}}, True),
    ({"store": {"zip": [{"exists": False}]}}, True),
    ({"store": {"zip": [{"exists": True}]}}, False),
    ({"warehouse": {"city": [{"exists": False}]}}, True),  # the parent is missing too
    ({"lines": {"sku": [{"prefix": "B-"}]}}, True),  # one object of an array
    ({"lines": {"sku": ["A-1"], "qty": [1]}}, False),  # ... and that one object must match all of it
    ({"coupon": [None]}, True),
    ({"tags": [{"anything-but": "gift"}]}, True),  # one element ("express") is not "gift"
    ({"$or": [{"store": {"city": ["Portland"]}}, {"price_usd": [120]}]}, True),
    ({"store": {"$or": [{"city": ["Portland"]}, {"id": [8]}]}}, False),
])
def test_body_scope(policy, expected):
    validate(policy, BODY)
    assert matches(policy, {}, scope=BODY, body=ORDER) is expected


def test_body_scope_ignores_attributes_and_reads_json_text():
    assert matches({"kind": ["a"]}, {"kind": "a"}, scope=BODY, body={}) is False
    assert matches({"kind": ["a"]}, {}, scope=BODY, body=body_of('{"kind": "a"}', True)) is True
    assert matches({"kind": ["a"]}, {}, scope=BODY, body=body_of("plain words", True)) is False
    # a body that is no JSON object is never matched, not even by exists: false (recorded against SNS: a plain
    # string, or a JSON string, was not delivered)
    assert matches({"kind": [{"exists": False}]}, {}, scope=BODY, body=body_of([1, 2])) is False
    assert matches({"kind": [{"exists": False}]}, {}, scope=BODY, body=body_of("plain words", True)) is False


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


def test_combinations_as_sns_counts_them():
    # SNS: 3 × 1 × 2 = 6
    assert combinations({"key_a": ["value_one", "value_two", "value_three"], "key_b": ["value_one"],
                         "key_c": ["value_one", "value_two"]}) == 6
    # $or branches add up: 1 × (2 + 1 × (2 + 3)) = 7
    assert combinations({"source": ["aws.cloudwatch"], "$or": [
        {"metricName": ["CPUUtilization", "ReadLatency"]},
        {"metricType": ["MetricType"], "$or": [{"metricId": [1234, 4321]}, {"spaceId": [1000, 2000, 3000]}]}]}) == 7
    validate({"a": list("abcdefghij"), "b": list("abcdefghijklmno")})  # exactly 150 is allowed


@pytest.mark.parametrize("policy, scope, body, attributes, key", [
    ({"a": ["x"], "b": ["y"]}, "MessageAttributes", None, {"a": "x", "b": "z"}, "b"),
    ({"store": {"city": ["Portland"]}}, BODY, ORDER, {}, "store.city"),
    ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, "MessageAttributes", None, {}, "$or"),
    ({"order.type": ["x"]}, "MessageAttributes", None, {"order.type": "y"}, "order.type"),
])
def test_failing_key_names_the_first_failing_key(policy, scope, body, attributes, key):
    assert failing_key(policy, attributes, scope=scope, body=body) == key


@pytest.mark.parametrize("policy, attributes, key, kwargs, text", [
    ({"a": ["x"]}, {}, None, {}, """attribute 'a' is missing; the filter policy requires ["x"]"""),
    ({"n": [{"numeric": [">", 5]}]}, {"n": 3}, None, {},
     """attribute 'n' is 3, which meets none of [{"numeric": [">", 5]}]"""),
    ({"b": ["y"]}, {"a": 1}, "a", {},
     "the filter policy's rules for attribute 'a' did not match (the policy has changed since)"),
    ({"a": ["x"]}, {"a": "x"}, None, {}, "the message matches the filter policy"),
    ({"order.type": ["x"]}, {"order.type": "y"}, None, {},
     """attribute 'order.type' is "y", which meets none of ["x"]"""),
    ({"store": {"city": ["Portland"]}}, {}, None, {"scope": BODY, "body": ORDER},
     """body key 'store.city' is "Seattle", which meets none of ["Portland"]"""),
    ({"store": {"zip": ["1"]}}, {}, None, {"scope": BODY, "body": ORDER},
     """body key 'store.zip' is missing; the filter policy requires ["1"]"""),
    ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, {}, None, {},
     "the message matches none of the $or branches of the filter policy"),
    (None, {}, EVENT_TYPE_KEY, {"event_types": ["order.*"], "event_type": "invoice.paid"},
     """event type 'invoice.paid' matches none of ["order.*"]"""),
])
def test_explain(policy, attributes, key, kwargs, text):
    assert explain(policy, attributes, key, **kwargs) == text


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


# --- cost: the worst input the limits allow stays linear -------------------------------------------------------------

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


def test_anything_but_is_a_set_lookup_with_the_old_meaning():
    big = {"x": [{"anything-but": [f"v{i}" for i in range(2000)]}]}
    assert filters.failing_key(big, {}, scope=filters.BODY, body={"x": ["v1999"] * 2000}) == "x"  # each one excluded
    assert filters.failing_key(big, {}, scope=filters.BODY, body={"x": ["v1999"] * 1999 + ["w"]}) is None
    numbers = {"n": [{"anything-but": [1, 2.5, "3"]}]}
    for value, passes in ((1, False), (1.0, False), (2.5, False), (3, True), ("3", False), ("1", True), (True, True)):
        assert (filters.failing_key(numbers, {}, scope=filters.BODY, body={"n": value}) is None) is passes, value
    one = {"s": [{"anything-but": "red"}]}
    assert filters.failing_key(one, {}, scope=filters.BODY, body={"s": "blue"}) is None
    assert filters.failing_key(one, {}, scope=filters.BODY, body={"s": "red"}) == "s"


WORST_RULES = {  # per operator: MAX_COMBINATIONS conditions on one key, each as long as the policy size allows
    "exact": lambda n: "v" * 1000 + str(n),
    "prefix": lambda n: {"prefix": "v" * 1000 + str(n)},
    "suffix": lambda n: {"suffix": str(n) + "v" * 1000},
    "equals-ignore-case": lambda n: {"equals-ignore-case": "V" * 1000 + str(n)},
    "numeric": lambda n: {"numeric": [">", -1e9, "<=", n]},
    "exists": lambda n: {"exists": True},
    "cidr": lambda n: {"cidr": f"10.{n % 256}.0.0/16"},
    "anything-but": lambda n: {"anything-but": [f"v{n}-{i}" for i in range(10)]},
    "anything-but prefix": lambda n: {"anything-but": {"prefix": "v" * 1000 + str(n)}},
}


@pytest.mark.parametrize("operator", sorted(WORST_RULES))
def test_every_operator_costs_one_check_per_element_whatever_the_conditions(operator, monkeypatch):
    """The worst policy the limits allow (150 conditions on one key) against a 28,000-element array (about the
    largest payload): each element is checked once against all the conditions compiled together, never once per
    condition (that was 150 × 28,000 checks: 2–28 s per publish; bench/publish_latency.py has the figures)."""
    rules = [WORST_RULES[operator](n) for n in range(filters.MAX_COMBINATIONS)]
    policy = {"x": rules}
    filters.validate(policy, scope=filters.BODY)  # the limits accept it
    calls = []
    real = filter_operators.identity
    monkeypatch.setattr(filter_operators, "identity", lambda value: calls.append(1) or real(value))
    for op in filter_operators.OPERATORS.values():
        monkeypatch.setattr(op, "one", lambda *args: pytest.fail("a condition checked one by one"))
    asked = []
    for op in filter_operators.OPERATORS.values():
        real_any = op.any_in
        monkeypatch.setattr(op, "any_in", lambda arg, index, real_any=real_any: asked.append(1) or real_any(arg, index))
    elements = [f"w{n}" for n in range(14_000)] + list(range(14_000))  # distinct: none checked twice
    assert filters.failing_key(policy, {}, scope=filters.BODY, body={"x": elements}) in ("x", None)
    assert len(calls) <= 3 * len(elements) + 1  # a few per element, whatever the number of conditions
    assert len(asked) <= filters.MAX_COMBINATIONS  # and a few steps per condition


def test_or_branches_asking_about_one_key_index_its_values_once(monkeypatch):
    """150 `$or` branches, each with its own condition on the same 28,000-element array (what the limits allow):
    the array is indexed once, and each branch asks the index (`any_in`), never each element again."""
    policy = {"$or": [{"x": [{"prefix": "w" * 1000 + str(n)}], "y": ["v"]} for n in range(150)]}
    filters.validate(policy, scope=filters.BODY)
    built = []
    real = filter_operators.Index.__init__
    monkeypatch.setattr(filter_operators.Index, "__init__", lambda self, values: built.append(1) or real(self, values))
    monkeypatch.setattr(filter_operators.Prefix, "one", lambda *args: pytest.fail("an element checked one by one"))
    body = {"x": [f"w{n}" for n in range(28_000)], "y": "v"}
    assert filters.failing_key(policy, {}, scope=filters.BODY, body=body) == "$or"
    assert len(built) == 1


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
                expected = filter_operators.holds_one_by_one(conditions, values)
                indexed = filter_operators.holds_indexed(conditions, filter_operators.Index(values))
                assert indexed is expected, (conditions, values)
                checked += 1
    assert checked > 100_000

"""Matching a message against a filter policy (pure), case by case from the Amazon SNS documentation's examples,
and what a match costs: the worst input the limits allow stays linear."""

import pytest

from delivery.rules.filters import conditions, index, matching
from delivery.rules.filters.limits import MAX_COMBINATIONS
from delivery.rules.filters.matching import failing_key, matches
from delivery.rules.filters.operators import anything_but, exact
from delivery.rules.filters.operators.strings import Prefix
from delivery.rules.filters.payload import body_of
from delivery.rules.filters.policy import validate
from delivery.rules.filters.reading import BODY


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


@pytest.mark.parametrize("policy, scope, body, attributes, key", [
    ({"a": ["x"], "b": ["y"]}, "MessageAttributes", None, {"a": "x", "b": "z"}, "b"),
    ({"store": {"city": ["Portland"]}}, BODY, ORDER, {}, "store.city"),
    ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, "MessageAttributes", None, {}, "$or"),
    ({"order.type": ["x"]}, "MessageAttributes", None, {"order.type": "y"}, "order.type"),
])
def test_failing_key_names_the_first_failing_key(policy, scope, body, attributes, key):
    assert failing_key(policy, attributes, scope=scope, body=body) == key


# --- cost: the worst input the limits allow stays linear -------------------------------------------------------------

def test_anything_but_is_a_set_lookup_with_the_old_meaning():
    big = {"x": [{"anything-but": [f"v{i}" for i in range(2000)]}]}
    assert failing_key(big, {}, scope=BODY, body={"x": ["v1999"] * 2000}) == "x"  # each one excluded
    assert failing_key(big, {}, scope=BODY, body={"x": ["v1999"] * 1999 + ["w"]}) is None
    numbers = {"n": [{"anything-but": [1, 2.5, "3"]}]}
    for value, passes in ((1, False), (1.0, False), (2.5, False), (3, True), ("3", False), ("1", True), (True, True)):
        assert (failing_key(numbers, {}, scope=BODY, body={"n": value}) is None) is passes, value
    one = {"s": [{"anything-but": "red"}]}
    assert failing_key(one, {}, scope=BODY, body={"s": "blue"}) is None
    assert failing_key(one, {}, scope=BODY, body={"s": "red"}) == "s"


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
    rules = [WORST_RULES[operator](n) for n in range(MAX_COMBINATIONS)]
    policy = {"x": rules}
    validate(policy, scope=BODY)  # the limits accept it
    calls = []
    real = index.identity
    for module in (index, exact, anything_but):  # every module that asks a value's identity
        monkeypatch.setattr(module, "identity", lambda value: calls.append(1) or real(value))
    for op in conditions.OPERATORS.values():
        monkeypatch.setattr(op, "one", lambda *args: pytest.fail("a condition checked one by one"))
    asked = []
    for op in conditions.OPERATORS.values():
        real_any = op.any_in
        monkeypatch.setattr(op, "any_in", lambda arg, index, real_any=real_any: asked.append(1) or real_any(arg, index))
    elements = [f"w{n}" for n in range(14_000)] + list(range(14_000))  # distinct: none checked twice
    assert failing_key(policy, {}, scope=BODY, body={"x": elements}) in ("x", None)
    assert len(calls) <= 3 * len(elements) + 1  # a few per element, whatever the number of conditions
    assert len(asked) <= MAX_COMBINATIONS  # and a few steps per condition


def test_or_branches_asking_about_one_key_index_its_values_once(monkeypatch):
    """150 `$or` branches, each with its own condition on the same 28,000-element array (what the limits allow):
    the array is indexed once, and each branch asks the index (`any_in`), never each element again."""
    policy = {"$or": [{"x": [{"prefix": "w" * 1000 + str(n)}], "y": ["v"]} for n in range(150)]}
    validate(policy, scope=BODY)
    built = []
    real = index.Index.__init__
    monkeypatch.setattr(index.Index, "__init__", lambda self, values: built.append(1) or real(self, values))
    monkeypatch.setattr(Prefix, "one", lambda *args: pytest.fail("an element checked one by one"))
    body = {"x": [f"w{n}" for n in range(28_000)], "y": "v"}
    assert failing_key(policy, {}, scope=BODY, body=body) == "$or"
    assert len(built) == 1


def test_a_few_values_are_asked_one_by_one_and_many_through_their_index(monkeypatch):
    """Values × conditions up to INDEX_AT: each condition asks each value (`one`); beyond it, the key's values are
    indexed once and each condition asks the index (`any_in`)."""
    built = []
    real = index.Index.__init__
    monkeypatch.setattr(index.Index, "__init__", lambda self, values: built.append(len(values)) or real(self, values))
    policy = {"x": [{"prefix": "b"}, {"prefix": "c"}]}
    assert matching.INDEX_AT == 64
    assert failing_key(policy, {"x": ["a"] * 32}) == "x"  # 32 × 2 = 64: one by one
    assert built == []
    assert failing_key(policy, {"x": ["a"] * 32 + ["c"]}) is None  # 33 × 2 = 66: indexed
    assert built == [33]


def test_a_stored_policy_is_read_once_per_decoded_object(monkeypatch):
    read = []
    real = matching.shape
    monkeypatch.setattr(matching, "shape", lambda *args, **kwargs: read.append(1) or real(*args, **kwargs))
    stored = {"region": ["eu"]}
    for region, failing in (("eu", None), ("us", "region"), ("eu", None)):
        assert failing_key(stored, {"region": region}) == failing
    assert len(read) == 1
    assert failing_key(dict(stored), {"region": "eu"}) is None  # another decoded object: read again
    assert len(read) == 2

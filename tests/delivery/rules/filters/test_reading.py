"""A filter policy read into a tree (pure): dotted keys and nested policies as paths, `$or` branches, and what a
strict reading refuses, naming the part."""

import pytest

from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.reading import ATTRIBUTES, BODY, Node, is_or, shape, steps


def outline(node: Node) -> list:
    """A tree as plain data: ("leaf", key, conditions), ("nested", key, [...]), ("or", [[...], ...])."""
    found = []
    for kind, key, item in node.entries:
        if kind == "leaf":
            found.append(("leaf", key, item.conditions))
        elif kind == "nested":
            found.append(("nested", key, outline(item)))
        else:
            found.append(("or", [outline(branch) for branch in item]))
    return found


def test_a_body_policys_dotted_keys_and_nested_keys_are_one_tree():
    tree = shape({"store.city": ["Seattle"], "store": {"id": [7]}, "kind": ["order"]}, BODY)
    assert outline(tree) == [("nested", "store", [("leaf", "city", ["Seattle"]), ("leaf", "id", [7])]),
                             ("leaf", "kind", ["order"])]


def test_an_attribute_name_is_one_step_dots_and_all():
    assert outline(shape({"order.type": ["x"]}, ATTRIBUTES)) == [("leaf", "order.type", ["x"])]
    assert steps("order.type", ATTRIBUTES) == ["order.type"]
    assert steps("order.type", BODY) == ["order", "type"]


def test_or_branches_are_read_in_order():
    tree = shape({"source": ["a"], "$or": [{"metric": ["cpu"]}, {"namespace": ["ec2"], "b": ["x"]}]})
    assert outline(tree) == [("leaf", "source", ["a"]),
                             ("or", [[("leaf", "metric", ["cpu"])], [("leaf", "namespace", ["ec2"]),
                                                                      ("leaf", "b", ["x"])]])]


@pytest.mark.parametrize("key, value, expected", [
    ("$or", [{"a": ["x"]}, {"b": ["y"]}], True),
    ("$or", [{"a": ["x"]}], False),  # one branch: a key named $or
    ("$or", [{"prefix": "x"}, {"b": ["y"]}], False),  # an operator's name: conditions
    ("$or", ["x", "y"], False),
    ("or", [{"a": ["x"]}, {"b": ["y"]}], False),
])
def test_or_is_the_operator_only_over_two_policies(key, value, expected):
    assert is_or(key, value) is expected


@pytest.mark.parametrize("policy, scope, refusal", [
    ({}, BODY, "the policy: must not be empty"),
    ({"a": {"b": {}}}, BODY, "a.b: must not be empty"),
    ({"": ["x"]}, ATTRIBUTES, "'': a key must be a non-empty name (a dotted path's steps too)"),
    ({"a..b": ["x"]}, BODY, "a..b: a key must be a non-empty name (a dotted path's steps too)"),
    ({"a": ["x"], "$or": [{"b": ["y"]}]}, ATTRIBUTES, "$or: must be a list of at least two policy objects to be "
     "SNS's $or operator (otherwise $or is a key like any other, and its list holds conditions)"),
    ({"a": {"b": ["x"]}}, ATTRIBUTES, "a: filter policy scope MessageAttributes does not support nested filter "
     "policy (nested keys need filter_policy_scope MessageBody)"),
    ({"a.b": ["x"], "a": {"b": ["y"]}}, BODY, "a.b: the same path twice (as a dotted key and inside a nested one); "
     "give its conditions once"),
    ({".".join("abcdefghijk"): ["x"]}, BODY, "a.b.c.d.e.f.g.h.i.j.k: nested more than 10 levels deep"),
    ({"a": ["x", {"prefix": 1}]}, ATTRIBUTES, "a[1].prefix: must be a non-empty string"),
    ({"a": [[1]]}, ATTRIBUTES, "a[0]: must be a string, a number, true, false, null or an operator object such as "
     "{\"prefix\": \"a\"}"),
    ({"a": "x"}, BODY, "a: must be a non-empty list of conditions or a nested policy"),
    ({"a": ["x"]}, "Body", "filter_policy_scope must be one of MessageAttributes, MessageBody"),
    (["a"], ATTRIBUTES, "must be an object mapping keys to lists of conditions"),
])
def test_a_strict_reading_names_what_sns_would_refuse(policy, scope, refusal):
    with pytest.raises(FilterPolicyError) as refused:
        shape(policy, scope)
    assert str(refused.value) == refusal


def nested(path: str, conditions: list) -> dict:
    """{"a": {"b": ... {"x": conditions}}} for "a.b.….x"."""
    policy = conditions
    for key in reversed(path.split(".")):
        policy = {key: policy}
    return policy


def test_a_policy_nests_at_most_ten_levels_deep():
    shape(nested("a.b.c.d.e.f.g.h.i.x", ["v"]), BODY)  # the leaf at the tenth level
    with pytest.raises(FilterPolicyError) as refused:
        shape(nested("a.b.c.d.e.f.g.h.i.j.x", ["v"]), BODY)
    assert str(refused.value) == "a.b.c.d.e.f.g.h.i.j: nested more than 10 levels deep"


def test_a_stored_policy_is_read_as_it_is():
    """Not strict: what a rule added since refuses is read, and a key without conditions matches nothing."""
    tree = shape({"n": [2e9, {"regex": "."}], "a": [], "b": "x"}, ATTRIBUTES, strict=False)
    assert outline(tree) == [("leaf", "n", [2e9, {"regex": "."}]), ("leaf", "a", []), ("leaf", "b", [])]

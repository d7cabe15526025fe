"""What a message holds at one step of a policy's path (pure): leaf values at any depth of arrays, objects, the
payload's own dotted keys, and the JSON a MessageBody policy filters on."""

import pytest

from delivery.rules.filters.payload import body_of, objects, values
from delivery.rules.filters.reading import ATTRIBUTES, BODY


@pytest.mark.parametrize("data, key, expected", [
    ({"a": "x"}, "a", ["x"]),
    ({"a": [1, [2, [None, True]], {"b": 3}]}, "a", [1, 2, None, True]),  # at any depth; an object is no leaf
    ({"a": {"b": 1}}, "a", []),
    ({"a": float("inf")}, "a", []),  # no JSON number
    ({"b": 1}, "a", []),
    (None, "a", []),
    (["a"], "a", []),
])
def test_leaf_values_at_one_step(data, key, expected):
    assert values(data, key) == expected


def test_objects_at_one_step_in_arrays_of_arrays():
    data = {"r": [{"k": 1}, [[{"k": 2}], "x"], None]}
    assert objects(data, "r", BODY) == [{"k": 1}, {"k": 2}]
    assert objects({"r": "x"}, "r", BODY) == []
    assert objects("x", "r", BODY) == []


def test_the_payloads_dotted_keys_continue_a_path():
    assert objects({"store.city": "Seattle"}, "store", BODY) == [{"city": "Seattle"}]
    # beside the nested object they are merged into it, both values kept
    assert objects({"store": {"city": "Portland", "id": 7}, "store.city": "Seattle"}, "store", BODY) == [
        {"city": ["Portland", "Seattle"], "id": 7}]
    # beside an array of objects they are one more object
    assert objects({"store": [{"id": 1}, {"id": 2}], "store.city": "Seattle"}, "store", BODY) == [
        {"id": 1}, {"id": 2}, {"city": "Seattle"}]
    assert objects({"store.city": "Seattle"}, "store", ATTRIBUTES) == []  # an attribute's name is whole


@pytest.mark.parametrize("payload, is_text, expected", [
    ({"kind": "a"}, False, {"kind": "a"}),
    ('{"kind": "a"}', True, {"kind": "a"}),
    ("[1, 2]", True, [1, 2]),
    ("plain words", True, None),
    ("[" * 100_000, True, None),  # too deep for the parser: no JSON
    (None, True, None),
])
def test_body_of(payload, is_text, expected):
    assert body_of(payload, is_text) == expected

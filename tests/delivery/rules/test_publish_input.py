"""What a publish may carry (delivery/rules/publish_input.py): the same reasons for the API and for Python."""

import pytest

from delivery.rules.publish_input import DEFAULT_EVENT_TYPE, ONE_OF, problems


def test_a_minimal_publish_is_fine():
    assert problems({"payload": {"n": 1}}) == {}
    assert problems({"message": "hello", "event_type": "note", "subject": "s", "attributes": {"a": "b", "n": 1.5},
                     "ordering_key": "k"}) == {}
    assert problems({"payload": None, "event_type": DEFAULT_EVENT_TYPE}) == {}  # null is a JSON value


@pytest.mark.parametrize("data,field", [
    ({}, "payload"), ({"payload": 1, "message": "x"}, "payload"), ({"message": 3}, "message"),
    ({"payload": 1, "event_type": "herald.endpoint.disabled"}, "event_type"),
    ({"payload": 1, "event_type": ""}, "event_type"), ({"payload": 1, "event_type": "x" * 257}, "event_type"),
    ({"payload": 1, "ordering_key": "a\nb"}, "ordering_key"),
    ({"payload": 1, "ordering_key": "k" * 257}, "ordering_key"),
    ({"payload": 1, "attributes": {"flag": True}}, "attributes"),
    ({"payload": 1, "attributes": {"x": [[1]]}}, "attributes"),
    ({"payload": 1, "attributes": {"x": [{"a": 1}]}}, "attributes"),
    ({"payload": 1, "attributes": "a=b"}, "attributes"), ({"payload": 1, "subject": 7}, "subject"),
])
def test_each_problem_names_its_field(data, field):
    assert field in problems(data), problems(data)


def test_the_reasons_say_what_to_do():
    assert problems({})["payload"] == ONE_OF
    assert "use a prefix of yours" in problems({"payload": 1, "event_type": "herald.x"})["event_type"]
    assert problems({"payload": 1, "attributes": {"flag": True}})["attributes"].startswith("flag:")

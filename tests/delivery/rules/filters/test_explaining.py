"""Why a message did not match its subscription's filters, in words (pure)."""

import pytest

from delivery.rules.filters.explaining import explain
from delivery.rules.filters.matching import EVENT_TYPE_KEY
from delivery.rules.filters.reading import BODY

CHANGED_SINCE = "the filter policy's rules for attribute 'a' did not match (the policy has changed since)"
ORDER = {"customer_interests": ["basketball", "rugby"], "price_usd": 120, "store": {"city": "Seattle", "id": 7}}


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


@pytest.mark.parametrize("policy, attributes, key, kwargs, text", [
    ({"kind": [{"exists": False}]}, {}, "kind", {},
     "the message has no attributes; attribute 'kind' is missing, but exists: false matches only a message with "
     "attributes (as SNS)"),
    ({"kind": ["a"]}, {}, None, {"scope": BODY, "body": None},
     "the message's body is not a JSON object, so no body key can match"),
    ({"tags": ["gift"]}, {"tags": ["x" * 150, "y" * 150]}, None, {},
     "attribute 'tags' is " + '["' + "x" * 150 + '", "' + "y" * 44 + "…, which meets none of [\"gift\"]"),
    (None, {}, EVENT_TYPE_KEY, {}, "the event type matched none of the subscription's event types"),
    # a message without attributes, failed on a key its subscription's policy no longer has (or no policy at all):
    # the fan-out report of it must still read
    ({"b": ["y"]}, {}, "a", {}, CHANGED_SINCE),
    (None, {}, "a", {}, CHANGED_SINCE),
])
def test_the_other_words(policy, attributes, key, kwargs, text):
    """A message without attributes against `exists: false`, a body that is no JSON object, a long value cut at
    200 characters, an event type no longer known."""
    assert explain(policy, attributes, key, **kwargs) == text

"""SNS filter policies and event-type filters through the API, a real worker and a real receiver."""

import pytest

from delivery.events import publish
from delivery.models import Message
from tests.conftest import settle

pytestmark = pytest.mark.django_db(transaction=True)


def add(api, topic, url, **extra):
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_each_subscription_receives_what_its_filters_match(api, receiver, redis_conn):
    topic = api.post("/api/topics/", {"name": "shop"}, format="json").json()
    gold = add(api, topic, receiver.url + "/gold", filter_policy_scope="MessageBody",
               filter_policy={"customer": {"tier": [{"equals-ignore-case": "gold"}]},
                              "total": [{"numeric": [">=", 100]}]})
    orders = add(api, topic, receiver.url + "/orders", event_types=["order.*"])
    office = add(api, topic, receiver.url + "/office",
                 filter_policy={"$or": [{"source_ip": [{"cidr": "10.0.0.0/24"}]},
                                        {"region": [{"anything-but": {"prefix": "us-"}}]}]})
    assert gold["filter_policy_scope"] == "MessageBody" and orders["event_types"] == ["order.*"]

    def publish(event_type, payload, attributes):
        response = api.post(f"/api/topics/{topic['id']}/publish/", {"event_type": event_type, "payload": payload,
                                                                    "attributes": attributes}, format="json")
        assert response.status_code == 202, response.content
        return response.json()["message_id"]

    first = publish("order.created", {"customer": {"tier": "GOLD"}, "total": 250}, {"source_ip": "10.0.0.7"})
    second = publish("order.item.added", {"customer": {"tier": "silver"}, "total": 500}, {"region": "us-east-1"})
    third = publish("invoice.paid", {"customer": {"tier": "gold"}, "total": 99}, {"region": "eu-west-1"})
    settle()

    got = {}
    for request in receiver.requests:
        got.setdefault(request.path.rsplit("/", 1)[1], set()).add(request.json()["id"])
    assert got == {"gold": {first}, "orders": {first, second}, "office": {first, third}}
    assert len(receiver.requests) == 5

    fanout = {row["subscription"]: row for row in api.get(f"/api/messages/{third}/").json()["fanout"]}
    assert fanout[gold["id"]]["outcome"] == "filtered_out"
    assert fanout[gold["id"]]["reason"] == ('filtered out: body key \'total\' is 99, which meets none of '
                                            '[{"numeric": [">=", 100]}]')
    assert fanout[orders["id"]]["reason"] == """filtered out: event type 'invoice.paid' matches none of ["order.*"]"""
    assert Message.objects.get(id=second).fanout_skipped["filtered_out"] == {"customer.tier": [gold["id"]],
                                                                             "$or": [office["id"]]}


@pytest.mark.parametrize("body, field, reason", [
    ({"filter_policy": {"a": ["x"], "b": ["x"], "c": ["x"], "d": ["x"], "e": ["x"], "f": ["x"]}},
     "filter_policy", "has 6 keys (a, b, c, d, e, f); at most 5 are allowed"),
    ({"filter_policy": {"a": list("abcdefghijklm"), "b": list("abcdefghijklm")}},
     "filter_policy", "has 169 combinations (a 13 × b 13); at most 150 are allowed"),
    ({"filter_policy": {"a": [{"numeric": [">", "ten"]}]}}, "filter_policy", "a[0].numeric[1]: must be a number"),
    ({"filter_policy": {"a": {"b": ["x"]}}}, "filter_policy", "a: filter policy scope MessageAttributes does not"),
    ({"filter_policy": {"a": ["x"]}, "filter_policy_scope": "Body"}, "filter_policy_scope", "is not a valid choice"),
    ({"event_types": "order.*"}, "event_types", "must be a list"),
    ({"max_events_per_batch": 5001}, "max_events_per_batch", "less than or equal to 5000"),
    ({"max_events_per_batch": 10, "raw_message_delivery": True}, "max_events_per_batch", "raw_message_delivery"),
    ({"preferred_batch_size_kb": 0}, "preferred_batch_size_kb", "greater than or equal to 1"),
])
def test_bad_subscription_options_answer_400_naming_the_part(api, receiver, body, field, reason):
    topic = api.post("/api/topics/", {"name": "shop"}, format="json").json()
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url, **body},
                        format="json")
    assert response.status_code == 400, response.content
    assert reason in " ".join(response.json()[field]), response.json()


def test_changing_the_scope_alone_checks_the_policy_against_it(api, receiver):
    topic = api.post("/api/topics/", {"name": "shop"}, format="json").json()
    created = add(api, topic, receiver.url, filter_policy_scope="MessageBody", filter_policy={"a": {"b": ["x"]}})
    response = api.patch(f"/api/subscriptions/{created['id']}/", {"filter_policy_scope": "MessageAttributes"},
                         format="json")
    assert response.status_code == 400
    assert "a: filter policy scope MessageAttributes does not support nested" in response.json()["filter_policy"][0]
    assert api.get(f"/api/subscriptions/{created['id']}/").json()["filter_policy_scope"] == "MessageBody"


def test_string_array_attributes_are_published_stored_shown_and_filtered(api, user, receiver, redis_conn):
    """SNS's String.Array: a JSON list of strings, numbers, true, false and null, accepted by publish,
    publish-batch and Python's publish(), kept and shown as published, matched element by element
    (https://docs.aws.amazon.com/sns/latest/dg/sns-message-attributes.html)."""
    topic = api.post("/api/topics/", {"name": "sports"}, format="json").json()
    rugby = add(api, topic, receiver.url + "/rugby", filter_policy={"interests": ["rugby"]})
    flagged = add(api, topic, receiver.url + "/flagged", filter_policy={"interests": [True]})
    tags = ["rugby", "football", 3, True, None]
    one = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {}, "attributes": {"interests": tags}},
                   format="json")
    assert one.status_code == 202 and one.json()["deliveries"] == 2, one.content
    batch = api.post(f"/api/topics/{topic['id']}/publish-batch/", {"entries": [
        {"id": "a", "payload": {}, "attributes": {"interests": ["tennis"]}},
        {"id": "b", "payload": {}, "attributes": {"interests": ["golf", "rugby"]}},
        {"id": "c", "payload": {}, "attributes": {"interests": [{"nested": 1}]}}]}, format="json").json()
    assert [(e["id"], e["deliveries"]) for e in batch["successful"]] == [("a", 0), ("b", 1)]
    assert batch["failed"][0]["id"] == "c" and "String.Array" in str(batch["failed"][0]["errors"])
    from_python = publish("sports", {}, owner=user, attributes={"interests": [False, "rugby"]})
    settle()

    shown = api.get(f"/api/messages/{one.json()['message_id']}/").json()
    assert shown["attributes"] == {"interests": tags}
    assert Message.objects.get(id=from_python.id).attributes == {"interests": [False, "rugby"]}
    got = {}
    for request in receiver.requests:
        got.setdefault(request.path.rsplit("/", 1)[1], set()).add(request.json()["id"])
    b = next(e["message_id"] for e in batch["successful"] if e["id"] == "b")
    assert got == {"rugby": {one.json()["message_id"], b, str(from_python.id)}, "flagged": {one.json()["message_id"]}}
    assert rugby["filter_policy"] == {"interests": ["rugby"]} and flagged["filter_policy"] == {"interests": [True]}


def test_a_dotted_body_key_through_the_api(api, receiver, redis_conn):
    """A policy SNS accepts, dotted keys and all, is accepted and matches the payloads SNS matches."""
    topic = api.post("/api/topics/", {"name": "objects"}, format="json").json()
    add(api, topic, receiver.url + "/nested", filter_policy_scope="MessageBody",
        filter_policy={"object.nested": ["string.value"], "flags": [None, False]})
    sent = [api.post(f"/api/topics/{topic['id']}/publish/", {"payload": payload}, format="json").json()
            for payload in ({"object": {"nested": "string.value"}, "flags": None},
                            {"object.nested": "string.value", "flags": [False]},
                            {"object": {"nested": "test-auto"}, "flags": None})]
    assert [s["deliveries"] for s in sent] == [1, 1, 0]
    fanout = api.get(f"/api/messages/{sent[2]['message_id']}/").json()["fanout"][0]
    assert fanout["reason"] == """filtered out: body key 'object.nested' is "test-auto", which meets none of \
["string.value"]"""

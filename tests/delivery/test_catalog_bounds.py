"""The catalog through the API: a schema reaches nothing outside itself, and what it costs a publish is bounded
(rules/json_schema.py). A listener on 127.0.0.1 stands for every address a schema might name: it accepts
connections and never answers, so a fetch would both be seen and hang."""

import socket

import pytest

from delivery.engine.accounts import catalog
from delivery.rules import schema_budget
from subscriptions.models import EventType


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    yield server
    server.close()


def connections(server) -> int:
    count = 0
    while True:
        try:
            server.accept()[0].close()
            count += 1
        except BlockingIOError:
            return count


def store(api, name, schema, **extra):
    return api.post("/api/event-types/", {"name": name, "schema": schema, **extra}, format="json")


@pytest.mark.django_db
def test_a_schema_naming_another_address_is_a_400_and_nothing_is_fetched(api, listener):
    port = listener.getsockname()[1]
    for n, reference in enumerate((f"http://127.0.0.1:{port}/x.json", f"http://localhost:{port}/x.json#/a",
                                   "file:///etc/passwd")):
        response = store(api, f"t.{n}", {"type": "object", "properties": {"a": {"$ref": reference}}})
        assert response.status_code == 400, response.content
        assert "does not resolve inside the schema (references are never fetched)" in response.json()["schema"][0]
        assert "/properties/a" in response.json()["schema"][0]
    assert connections(listener) == 0


@pytest.mark.django_db
def test_a_schema_stored_before_the_rules_is_refused_at_publish_without_fetching(api, user, listener):
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    port = listener.getsockname()[1]
    EventType.objects.create(owner=user, name="order.created", validate_payloads=True,  # as an older Herald stored it
                             schema={"$ref": f"http://127.0.0.1:{port}/remote.json"})
    catalog._compiled.clear()
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {}, "event_type": "order.created"},
                         format="json")
    assert published.status_code == 400, published.content
    assert "its schema is no longer accepted" in published.json()["payload"][0]
    assert connections(listener) == 0


@pytest.mark.django_db
@pytest.mark.parametrize("schema, reason", [
    ({"type": "string", "pattern": "(a)\\1"}, "catalog schemas use RE2"),
    ({"$ref": "#"}, "a reference cycle never descends into the payload"),
    ({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}, "a reference cycle"),
])
def test_a_schema_whose_evaluation_has_no_bound_is_a_400_naming_schema(api, schema, reason):
    response = store(api, "t.x", schema, validate_payloads=True)
    assert response.status_code == 400 and reason in response.json()["schema"][0], response.content


@pytest.mark.django_db
def test_the_worst_payloads_of_accepted_schemas_are_answered(api, settings):
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    worst = {
        "redos": ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}},
                  {"s": "a" * 30 + "!"}, "does not match '^(a+)+$'"),
        "names": ({"type": "object", "propertyNames": {"pattern": "^(a+)+$"}}, {"a" * 30 + "!": 1}, "does not match"),
        "enum": ({"type": "array", "items": {"enum": list(range(9000))}}, list(range(9000, 9010)),
                 "is not one of the 9000 values of its enum"),
        "unique": ({"type": "array", "uniqueItems": True}, [{"n": n} for n in range(20_000)],
                   "HERALD_SCHEMA_CHECK_BUDGET"),
    }
    for name, (schema, payload, reason) in worst.items():
        made = store(api, f"w.{name}", schema, validate_payloads=True)
        assert made.status_code == 201, made.content
        answer = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": payload, "event_type": f"w.{name}"},
                          format="json")
        assert answer.status_code == 400 and reason in answer.json()["payload"][0], (name, answer.content[:300])
    settings.HERALD_SCHEMA_CHECK_BUDGET = 200_000  # an operator who accepts the cost checks the large one
    unique = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": [{"n": n} for n in range(20_000)],
                                                            "event_type": "w.unique"}, format="json")
    assert unique.status_code == 202, unique.content[:300]


@pytest.mark.django_db
def test_a_batch_of_entries_shares_one_publishs_budget(api, settings, monkeypatch):
    """100 entries cost at most what one publish may: the checks spend one budget between them, and the entries
    past it are refused alone (413, saying why), not checked. Before, each entry had a budget of its own."""
    settings.HERALD_SCHEMA_CHECK_BUDGET = 1000
    done = []  # the units of evaluation actually spent (a charge past the budget stops the check instead)
    spend = schema_budget._Meter.spend

    def counted(meter, units):
        spend(meter, units)
        done.append(units)

    monkeypatch.setattr(schema_budget._Meter, "spend", counted)
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    assert store(api, "order.lines", {"type": "array", "items": {"type": "integer"}},
                 validate_payloads=True).status_code == 201
    entries = [{"id": f"e{n}", "event_type": "order.lines", "payload": list(range(100))} for n in range(100)]
    answer = api.post(f"/api/topics/{topic['id']}/publish-batch/", {"entries": entries}, format="json").json()
    assert sum(done) == 3 * 302  # type 101 + items 101 + 100 × 1 per entry: three fit in 1,000, the fourth does not
    assert [item["id"] for item in answer["successful"]] == ["e0", "e1", "e2"]
    assert len(answer["failed"]) == 97 and {item["status"] for item in answer["failed"]} == {413}
    assert "the entries before it in this request spent the 1000 units of evaluation one request may" in (
        answer["failed"][0]["errors"]["payload"][0])
    done.clear()
    alone = {"event_type": "order.lines", "payload": list(range(100))}  # in another request: a budget of its own
    assert api.post(f"/api/topics/{topic['id']}/publish/", alone, format="json").status_code == 202
    assert sum(done) == 302

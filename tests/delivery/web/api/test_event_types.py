"""The catalog through the API: payloads validated where the owner asks, tenants choosing their types from it."""

import pytest

from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture


def test_the_catalog_validates_payloads_where_asked_and_tenants_choose_from_it(shop):
    api, orders, acme = shop["api"], shop["orders"], shop["acme"]["client"]
    schema = {"type": "object", "required": ["order"], "properties": {
        "order": {"type": "integer"}, "lines": {"type": "array", "items": {"type": "object", "properties": {
            "amount": {"type": "number"}}}}}}
    made = api.post("/api/event-types/", {"name": "order.created", "schema": schema, "example": {"order": 1},
                                          "validate_payloads": True}, format="json")
    assert made.status_code == 201, made.content
    bad_schema = api.post("/api/event-types/", {"name": "x.y", "schema": {"type": "nonsense"}}, format="json")
    assert bad_schema.status_code == 400 and "schema" in bad_schema.json()
    bad_example = api.post("/api/event-types/", {"name": "x.z", "schema": schema, "example": {"order": "1"}},
                           format="json")
    assert bad_example.status_code == 400 and "example" in bad_example.json()
    again = api.post("/api/event-types/", {"name": "order.created"}, format="json")
    assert again.status_code == 409
    other = api.post("/api/event-types/", {"name": "order.renamed", "open_to_tenants": False}, format="json").json()
    renamed = api.patch(f"/api/event-types/{other['id']}/", {"name": "order.created"}, format="json")
    assert renamed.status_code == 409 and "name" in renamed.json()  # a rename onto a taken name, not a 500

    def publishing(payload):
        return api.post(f"/api/topics/{orders['id']}/publish/", {"payload": payload, "event_type": "order.created"},
                        format="json")

    refused = publishing({"order": 7, "lines": [{"amount": "x"}]})
    assert refused.status_code == 400 and "payload.lines[0].amount" in refused.json()["payload"][0], refused.json()
    assert publishing({"order": 7, "lines": [{"amount": 1.5}]}).status_code == 202
    other_type = api.post(f"/api/topics/{orders['id']}/publish/", {"payload": "anything", "event_type": "other"},
                          format="json")
    assert other_type.status_code == 202  # only the types that ask for it are validated
    batch = api.post(f"/api/topics/{orders['id']}/publish-batch/", {"entries": [
        {"id": "good", "payload": {"order": 1}, "event_type": "order.created"},
        {"id": "bad", "payload": {}, "event_type": "order.created"}]}, format="json").json()
    assert [s["id"] for s in batch["successful"]] == ["good"] and batch["failed"][0]["id"] == "bad"

    api.post("/api/event-types/", {"name": "order.legacy", "deprecated": True}, format="json")
    for types, field in ((["order.unknown"], "event_types"), (["order.legacy"], "event_types"), ([], "event_types")):
        response = acme.post("/api/subscriptions/", {"topic": orders["id"], "endpoint": "http://127.0.0.1:9/c",
                                                     "event_types": types}, format="json")
        assert response.status_code == 400 and field in response.json(), (types, response.content)
    chosen = acme.post("/api/subscriptions/", {"topic": orders["id"], "endpoint": "http://127.0.0.1:9/c",
                                               "event_types": ["order.created"]}, format="json")
    assert chosen.status_code == 201, chosen.content
    listed = acme.get("/api/event-types/").json()["results"]
    assert {t["name"]: t["deprecated"] for t in listed} == {"order.created": False, "order.legacy": True}


TO_JANUARY = "function handler(webhook) {\n  webhook.payload = {name: webhook.payload.full_name};\n  return webhook;\n}"


def versions_of(event_type: dict) -> str:
    return f"/api/event-types/{event_type['id']}/versions/"


def test_versions_are_added_in_order_and_listed_oldest_first(api):
    customer = api.post("/api/event-types/", {"name": "customer.created"}, format="json").json()
    assert (customer["versions"], customer["latest_version"]) == ([], "")
    url = versions_of(customer)
    first = api.post(url, {"name": "2026-01-01", "example": {"name": "Ada"}}, format="json")
    assert first.status_code == 201, first.content
    assert {k: v for k, v in first.json().items() if k != "created_at"} == {
        "name": "2026-01-01", "schema": None, "example": {"name": "Ada"}, "down_converter": ""}
    second = api.post(url, {"name": "2026-06-01", "example": {"full_name": "Ada"}, "down_converter": TO_JANUARY},
                      format="json")
    assert second.status_code == 201, second.content
    listed = api.get(url).json()
    assert listed["count"] == 2 and [v["name"] for v in listed["results"]] == ["2026-01-01", "2026-06-01"]
    assert listed["results"][1]["down_converter"] == TO_JANUARY  # as sent, its lines kept
    shown = api.get(f"/api/event-types/{customer['id']}/").json()
    assert (shown["versions"], shown["latest_version"]) == (["2026-01-01", "2026-06-01"], "2026-06-01")
    assert api.get(url, {"limit": 1}).json()["results"][0]["name"] == "2026-01-01"  # a page of them


@pytest.mark.parametrize(("body", "field", "reason"), [
    ({"name": "2026-06-01"}, "down_converter", "give the JavaScript handler(webhook)"),
    ({"name": "2025-01-01", "down_converter": TO_JANUARY}, "name", "versions come in order"),
    ({"name": "2026-01-01", "down_converter": TO_JANUARY}, "name", "exists"),
    ({"name": "2026-06-01", "down_converter": "function handler(w) {\n  return w"}, "down_converter",
     "line 2: SyntaxError"),
    ({"name": "2026-06-01", "down_converter": TO_JANUARY, "schema": {"type": "nonsense"}}, "schema", "JSON Schema"),
    ({"name": "June 2026", "down_converter": TO_JANUARY}, "name", "letters, digits"),
    ({"name": "2026-06-01", "down_converter": TO_JANUARY, "upconverter": "x"}, "upconverter", "unknown field"),
])
def test_a_version_the_service_refuses_is_a_400_naming_the_field_and_adds_nothing(api, body, field, reason):
    customer = api.post("/api/event-types/", {"name": "customer.created"}, format="json").json()
    assert api.post(versions_of(customer), {"name": "2026-01-01"}, format="json").status_code == 201
    refused = api.post(versions_of(customer), body, format="json")
    assert refused.status_code == 400 and reason in " ".join(refused.json()[field]), refused.json()
    assert [v["name"] for v in api.get(versions_of(customer)).json()["results"]] == ["2026-01-01"]


def test_another_owners_type_has_no_versions_to_read_or_add(api, other_api):
    theirs = other_api.post("/api/event-types/", {"name": "customer.created"}, format="json").json()
    assert api.get(versions_of(theirs)).status_code == 404
    assert api.post(versions_of(theirs), {"name": "2026-01-01"}, format="json").status_code == 404
    assert other_api.get(versions_of(theirs)).json()["count"] == 0


def test_a_tenant_reads_the_versions_of_open_types_without_their_converters_and_adds_none(shop):
    api, acme = shop["api"], shop["acme"]["client"]
    customer = api.post("/api/event-types/", {"name": "customer.created"}, format="json").json()
    closed = api.post("/api/event-types/", {"name": "audit.logged", "open_to_tenants": False}, format="json").json()
    for event_type in (customer, closed):
        api.post(versions_of(event_type), {"name": "2026-01-01"}, format="json")
    api.post(versions_of(customer), {"name": "2026-06-01", "down_converter": TO_JANUARY}, format="json")
    read = acme.get(versions_of(customer))
    assert read.status_code == 200
    assert [sorted(v) for v in read.json()["results"]] == [["created_at", "example", "name", "schema"]] * 2
    assert acme.get(f"/api/event-types/{customer['id']}/").json()["latest_version"] == "2026-06-01"
    assert acme.get(versions_of(closed)).status_code == 404  # closed to tenants: as if it did not exist
    added = acme.post(versions_of(customer), {"name": "2026-11-01", "down_converter": TO_JANUARY},
                      format="json")
    assert added.status_code == 404
    assert api.get(f"/api/event-types/{customer['id']}/").json()["versions"] == ["2026-01-01", "2026-06-01"]

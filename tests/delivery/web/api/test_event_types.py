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

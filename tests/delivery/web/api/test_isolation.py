"""Tenant isolation over every route in the OpenAPI schema: another user gets 404, anonymous gets 401.

The routes come from the schema itself, so a new route is covered (or fails this test) without editing it.
"""

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from delivery.models import Delivery

pytestmark = pytest.mark.django_db
# The confirmation token is the credential; the schema and public keys are public by nature.
PUBLIC = {("get", "/api/subscriptions/confirm/"), ("get", "/api/schema/"), ("get", "/api/keys/{keys_id}/jwks.json")}


def operations():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, methods in schema["paths"].items():
        for method in methods:
            if method in {"get", "post", "put", "patch", "delete"}:
                yield method, path


@pytest.fixture
def alice_objects(api, redis_conn):
    topic = api.post("/api/topics/", {"name": "private"}, format="json").json()
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://127.0.0.1:9/x"},
                            format="json").json()
    message = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    tenant = api.post("/api/tenants/", {"external_id": "acme", "name": "Acme"}, format="json").json()
    event_type = api.post("/api/event-types/", {"name": "order.created"}, format="json").json()
    return {"topics": topic["id"], "subscriptions": subscription["id"], "messages": message["message_id"],
            "deliveries": Delivery.objects.get().id, "endpoints": subscription["endpoint_id"],
            "tenants": tenant["id"], "event-types": event_type["id"]}


def test_every_object_route_answers_404_to_another_user(other_api, alice_objects):
    checked = 0
    for method, path in operations():
        if "{id}" not in path:
            continue
        resource = path.split("/")[2]
        assert resource in alice_objects, f"new resource {resource}: add an object for it to this test"
        url = path.replace("{id}", str(alice_objects[resource]))
        response = getattr(other_api, method)(url, {}, format="json")
        assert response.status_code == 404, (method, url, response.status_code)
        checked += 1
    assert checked >= 14  # every {id} route the API had when this was written


def test_lists_show_another_user_nothing(other_api, alice_objects):
    for method, path in operations():
        if method == "get" and "{id}" not in path and (method, path) not in PUBLIC and path.count("/") == 3:
            body = other_api.get(path).json()
            if "count" in body:
                assert body["count"] == 0, path


def test_no_publishing_or_subscribing_to_another_users_topic(other_api, alice_objects):
    topic_id = alice_objects["topics"]
    assert other_api.post(f"/api/topics/{topic_id}/publish/", {"payload": 1}, format="json").status_code == 404
    response = other_api.post("/api/subscriptions/", {"topic": topic_id, "endpoint": "http://127.0.0.1:9/y"},
                              format="json")
    assert response.status_code == 400 and "does not exist" in response.json()["topic"][0]
    assert Delivery.objects.count() == 1


def test_every_route_answers_401_to_anonymous(alice_objects):
    client = APIClient()
    for method, path in operations():
        if (method, path) in PUBLIC:
            continue
        url = path.replace("{id}", str(alice_objects.get(path.split("/")[2], 1)))
        response = getattr(client, method)(url, {}, format="json")
        assert response.status_code == 401, (method, url, response.status_code)

"""Alice's shop, the tenants' fixture the API, portal and catalog tests share: an open topic, a closed one, two
tenants with a key and an endpoint each, and Alice's own subscriptions."""

import pytest
from rest_framework.test import APIClient

from delivery.models import Delivery


def key_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def shop(api, user, redis_conn):
    """Alice's shop: an open topic `orders`, a closed topic `internal`, tenants acme and globex with a key and an
    endpoint each (subscribed with their own keys), and Alice's own subscriptions to both topics."""
    orders = api.post("/api/topics/", {"name": "orders", "open_to_tenants": True}, format="json").json()
    internal = api.post("/api/topics/", {"name": "internal"}, format="json").json()
    found = {"orders": orders, "internal": internal, "api": api}
    for name in ("acme", "globex"):
        tenant = api.post("/api/tenants/", {"external_id": name, "name": name.title()}, format="json")
        assert tenant.status_code == 201, tenant.content
        key = api.post(f"/api/tenants/{tenant.json()['id']}/keys/", {"name": "ci"}, format="json")
        assert key.status_code == 201, key.content
        client = key_client(key.json()["key"])
        subscribed = client.post("/api/subscriptions/", {"topic": orders["id"],
                                                         "endpoint": f"http://127.0.0.1:9/{name}"}, format="json")
        assert subscribed.status_code == 201, subscribed.content
        found[name] = {"tenant": tenant.json(), "key": key.json()["key"], "client": client,
                       "subscription": subscribed.json()}
    for topic in (orders, internal):
        own = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": f"http://127.0.0.1:9/own/{topic['name']}"},
                       format="json")
        assert own.status_code == 201
        found.setdefault("own", []).append(own.json())
    return found


def receivers_of(message_id) -> set[str]:
    return {url.rsplit("/", 1)[-1] if "/own/" not in url else "own"
            for url in Delivery.objects.filter(message_id=message_id).values_list("endpoint__url", flat=True)}


def tenant_chooses(shop, tenant: str, *event_types: str) -> None:
    """`tenant`'s subscription in the shop chooses these event types of its owner's catalog (through its own key)."""
    sub = shop[tenant]["subscription"]["id"]
    chose = shop[tenant]["client"].patch(f"/api/subscriptions/{sub}/", {"event_types": list(event_types)},
                                         format="json")
    assert chose.status_code == 200, chose.content

"""Each owner's objects are its own (delivery/web/api/ownership.py): another's answer 404, staff see everything; a
tenant's key sees its own slice without the owner's tuning of it."""

import pytest

from delivery.models import Delivery
from tests.conftest import client_for
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture
TUNED = "set by the owner of these webhooks (how events are delivered), not with a tenant key"


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_another_users_objects_answer_404(api, other_api, receiver):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"], url=receiver.url)
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    delivery = Delivery.objects.get()
    endpoint_id = subscription["endpoint_id"]

    for path in [f"/api/topics/{topic['id']}/", f"/api/subscriptions/{subscription['id']}/",
                 f"/api/messages/{published['message_id']}/", f"/api/deliveries/{delivery.id}/",
                 f"/api/endpoints/{endpoint_id}/"]:
        assert other_api.get(path).status_code == 404, path
    assert other_api.patch(f"/api/topics/{topic['id']}/", {"description": "x"}, format="json").status_code == 404
    assert other_api.delete(f"/api/subscriptions/{subscription['id']}/").status_code == 404
    assert other_api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").status_code == 404
    # Subscribing to someone else's topic looks exactly like subscribing to a topic that does not exist.
    foreign = other_api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json")
    missing = other_api.post("/api/subscriptions/", {"topic": 999999, "endpoint": receiver.url}, format="json")
    assert foreign.status_code == missing.status_code == 400
    assert foreign.json()["topic"][0].replace(str(topic["id"]), "N") == missing.json()["topic"][0].replace(
        "999999", "N")
    for path in ["/api/topics/", "/api/subscriptions/", "/api/messages/", "/api/deliveries/", "/api/endpoints/"]:
        assert other_api.get(path).json()["count"] == 0, path


def test_staff_see_everything(api, django_user_model):
    create_topic(api)
    staff = django_user_model.objects.create_user("ops", password="pw-ops-12345", is_staff=True)

    assert client_for(staff).get("/api/topics/").json()["count"] == 1


def test_a_tenant_sees_and_sets_none_of_the_owners_tuning(shop):
    """OwnerTuning: retry policies, batch sizes and retention are the owner's; a tenant's key neither sees them nor
    sends them, while the owner's token sees and sets them all."""
    api, acme, subscription = shop["api"], shop["acme"]["client"], shop["acme"]["subscription"]
    assert list(acme.get(f"/api/topics/{shop['orders']['id']}/").json()) == [
        "id", "name", "description", "open_to_tenants", "created_at", "updated_at"]
    assert {"delivery_policy", "message_retention_days"} <= set(api.get(f"/api/topics/{shop['orders']['id']}/").json())
    tuning = {"delivery_policy", "effective_delivery_policy", "effective_delivery_policy_sources",
              "max_events_per_batch", "preferred_batch_size_kb"}
    url = f"/api/subscriptions/{subscription['id']}/"
    seen = set(acme.get(url).json())
    assert not seen & tuning and {"id", "endpoint", "filter_policy"} <= seen
    assert tuning <= set(api.get(url).json())
    refused = acme.patch(url, {"delivery_policy": {"preset": "event-grid"}, "max_events_per_batch": 5,
                               "filter_policy": {"kind": ["a"]}}, format="json")
    assert (refused.status_code, refused.json()) == (400, {"delivery_policy": [TUNED], "max_events_per_batch": [TUNED]})
    assert api.get(url).json()["filter_policy"] is None  # nothing of the request was applied
    assert api.patch(url, {"max_events_per_batch": 5}, format="json").json()["max_events_per_batch"] == 5

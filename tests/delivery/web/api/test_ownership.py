"""Each owner's objects are its own: another's answer 404, staff see everything."""

import pytest

from delivery.models import Delivery
from tests.conftest import client_for
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db


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

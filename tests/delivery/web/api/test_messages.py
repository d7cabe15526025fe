"""Publishing and the messages resource: 202 with the message id, strict input, 413 over the size limit, the
fan-out to confirmed matching subscriptions, a message's deliveries and whom it was published for."""

import pytest

from delivery.events import publish
from delivery.models import Delivery, Message
from subscriptions.models import Subscription, Tenant
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_publish_answers_202_with_message_id_and_delivery_count(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/a")
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/b")
    response = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"a": 1}, "attributes": {"k": "v"}},
                        format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["deliveries"] == 2 and body["duplicate"] is False
    message = Message.objects.get(id=body["message_id"])
    assert message.payload == {"a": 1} and message.attributes == {"k": "v"}
    assert Delivery.objects.filter(message=message, status="pending").count() == 2


def test_publish_validation(api):
    topic = create_topic(api)
    url = f"/api/topics/{topic['id']}/publish/"
    neither = api.post(url, {"subject": "x"}, format="json")
    assert neither.status_code == 400 and "payload" in neither.json()
    both = api.post(url, {"payload": 1, "message": "x"}, format="json")
    assert both.status_code == 400
    bad_attrs = api.post(url, {"payload": 1, "attributes": {"k": {"nested": 1}}}, format="json")
    assert bad_attrs.status_code == 400 and "attributes" in bad_attrs.json()
    malformed = api.generic("POST", url, '{"payload": ', content_type="application/json")
    assert malformed.status_code == 400 and "JSON" in malformed.json()["detail"]
    assert Message.objects.count() == 0


def test_publish_over_the_size_limit_answers_413(api, settings):
    settings.HERALD_MAX_PAYLOAD_BYTES = 1000
    topic = create_topic(api)
    url = f"/api/topics/{topic['id']}/publish/"
    assert api.post(url, {"message": "x" * 1000}, format="json").status_code == 202
    response = api.post(url, {"message": "x" * 1001}, format="json")
    assert response.status_code == 413 and "1001 bytes" in response.json()["detail"]
    assert Message.objects.count() == 1


def test_only_confirmed_matching_subscriptions_get_deliveries(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/all")
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/eu", filter_policy={"region": ["eu"]})
    pending = create_subscription(api, topic["id"], url="http://127.0.0.1:9/pending")
    # never confirmed (a confirmed_at would make it one awaiting a changed endpoint's consent: held, not skipped)
    Subscription.objects.filter(id=pending["id"]).update(status="pending_confirmation", confirmed_at=None)
    url = f"/api/topics/{topic['id']}/publish/"
    assert api.post(url, {"payload": 1, "attributes": {"region": "us"}}, format="json").json()["deliveries"] == 1
    assert api.post(url, {"payload": 1, "attributes": {"region": "eu"}}, format="json").json()["deliveries"] == 2


def test_message_detail_shows_per_subscription_status(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    detail = api.get(f"/api/messages/{published['message_id']}/").json()
    assert [(d["subscription"], d["status"]) for d in detail["deliveries"]] == [(subscription["id"], "pending")]
    assert api.get(f"/api/deliveries/?message={published['message_id']}").json()["count"] == 1


def test_a_message_shows_whom_it_was_published_for(shop, admin_client):
    owner = Tenant.objects.get(external_id="acme").owner
    for_acme = publish("orders", {"n": 1}, owner=owner, tenant="acme")
    for_all = publish("orders", {"n": 2}, owner=owner, broadcast=True)
    shown = {m: shop["api"].get(f"/api/messages/{m.id}/").json() for m in (for_acme, for_all)}
    assert (shown[for_acme]["tenant"], shown[for_acme]["broadcast"]) == ("acme", False)
    assert (shown[for_all]["tenant"], shown[for_all]["broadcast"]) == (None, True)
    page = admin_client.get(f"/admin/herald_delivery/message/{for_acme.id}/change/").content.decode()
    assert "Acme" in page and "Broadcast" in page


def test_the_fanout_answers_for_another_tenants_subscription(shop):
    """"Why did Globex not get it?": the message was published for Acme. Every subscription of the topic has a row,
    the other tenants' as `not_addressed`, counted and filtered by the database like every outcome."""
    api, owner = shop["api"], Tenant.objects.get(external_id="acme").owner
    for_acme = publish("orders", {"n": 1}, owner=owner, tenant="acme")
    globex = shop["globex"]["subscription"]["id"]
    answer = api.get(f"/api/messages/{for_acme.id}/fanout/?subscription={globex}").json()
    assert answer["count"] == 1
    row = answer["results"][0]
    assert (row["outcome"], row["tenant"]) == ("not_addressed", "globex")
    assert row["reason"] == "published for tenant 'acme'; this subscription is tenant 'globex''s, which the message " \
                            "was not for"
    assert "tenant='globex'" in row["fix"]
    detail = api.get(f"/api/messages/{for_acme.id}/").json()
    assert detail["fanout_summary"]["not_addressed"] == 1
    assert detail["fanout_summary"]["delivery_created"] == 2  # acme's and the owner's own
    listed = api.get(f"/api/messages/{for_acme.id}/fanout/?outcome=not_addressed").json()
    assert [r["subscription"] for r in listed["results"]] == [globex]
    own_only = publish("orders", {"n": 2}, owner=owner)
    rows = {r["tenant"]: r for r in api.get(f"/api/messages/{own_only.id}/fanout/").json()["results"]}
    assert rows["acme"]["outcome"] == rows["globex"]["outcome"] == "not_addressed"
    assert rows["acme"]["reason"].startswith("published for the owner's own subscriptions only")
    assert rows[None]["outcome"] == "delivery_created"

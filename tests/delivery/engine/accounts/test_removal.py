"""Deleting a subscription or a topic (engine/accounts/removal.py) through every door (the API, the portal, the
admin's page and its bulk action, Python): all or nothing, a 409 while any of its deliveries is being sent (its
worker is about to record the attempt, which needs the row), and what goes with it once nothing is."""

from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from delivery.engine.accounts import removal, tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.events import publish
from delivery.models import Attempt, Delivery, Message
from subscriptions.models import Endpoint, Subscription, Tenant, Topic
from tests.conftest import publish as publish_through_api
from tests.conftest import settle, subscribe
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.receiver import Reply

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared


def being_sent(deliveries) -> None:
    """As a worker's claim leaves them: in flight under a lease that has not run out."""
    deliveries.update(status="in_flight", lease_until=timezone.now() + timedelta(minutes=1))


def subscription_door(door: str, sub: int, shop, client, admin_client):
    if door == "the tenant's key":
        return shop["acme"]["client"].delete(f"/api/subscriptions/{sub}/")
    if door == "the owner's API":
        return shop["api"].delete(f"/api/subscriptions/{sub}/")
    if door == "the portal":
        link = tenancy.portal_link(Tenant.objects.get(external_id="acme"))
        return client.post(f"{link}subscriptions/{sub}/delete/", {"confirm": "yes"})
    if door == "the admin's page":
        return admin_client.post(f"/admin/herald_subscriptions/subscription/{sub}/delete/", {"post": "yes"},
                                 follow=True)
    return admin_client.post("/admin/herald_subscriptions/subscription/", {
        "action": "delete_selected", "_selected_action": [sub], "post": "yes"}, follow=True)


SUBSCRIPTION_DOORS = {  # door: (status refused, status deleted); the admin answers with its page and a message
    "the tenant's key": (409, 204), "the owner's API": (409, 204), "the portal": (409, 302),
    "the admin's page": (200, 200), "the admin's bulk delete": (200, 200)}


@pytest.mark.parametrize("door", SUBSCRIPTION_DOORS)
def test_a_subscription_being_sent_to_is_deleted_by_no_door_until_its_sends_end(door, shop, user, client,
                                                                               admin_client):
    sub = shop["acme"]["subscription"]["id"]
    for n in range(3):
        publish("orders", {"n": n}, owner=user, tenant="acme")
    mine = Delivery.objects.filter(subscription_id=sub)
    being_sent(mine.filter(id=mine.order_by("id")[0].id))
    endpoint = Subscription.objects.get(id=sub).endpoint_id
    refused_status, deleted_status = SUBSCRIPTION_DOORS[door]

    refused = subscription_door(door, sub, shop, client, admin_client)
    text = refused.content.decode()
    assert refused.status_code == refused_status, text
    assert "This subscription has 1 delivery being sent right now (in flight); nothing was deleted." in text
    assert "pause the subscription first" in text
    assert Subscription.objects.filter(id=sub).exists() and mine.count() == 3  # nothing half-deleted

    mine.update(status="succeeded", lease_until=None)  # its send ended
    deleted = subscription_door(door, sub, shop, client, admin_client)
    assert deleted.status_code == deleted_status, deleted.content.decode()
    assert not Subscription.objects.filter(id=sub).exists() and not mine.exists()
    assert Endpoint.objects.filter(id=endpoint).exists()  # the tenant's endpoint record stays
    assert Subscription.objects.filter(id=shop["globex"]["subscription"]["id"]).exists()


def topic_door(door: str, topic: int, shop, admin_client):
    if door == "the API":
        return shop["api"].delete(f"/api/topics/{topic}/")
    if door == "the admin's page":
        return admin_client.post(f"/admin/herald_subscriptions/topic/{topic}/delete/", {"post": "yes"}, follow=True)
    return admin_client.post("/admin/herald_subscriptions/topic/", {
        "action": "delete_selected", "_selected_action": [topic], "post": "yes"}, follow=True)


TOPIC_DOORS = {"the API": (409, 204), "the admin's page": (200, 200), "the admin's bulk delete": (200, 200)}


@pytest.mark.parametrize("door", TOPIC_DOORS)
def test_a_topic_is_deleted_by_no_door_while_a_delivery_of_its_subscriptions_is_being_sent(door, shop, user,
                                                                                          admin_client):
    topic = shop["orders"]["id"]
    publish("orders", {"n": 1}, owner=user, broadcast=True)  # acme's, globex's and Alice's own subscriptions
    its = Delivery.objects.filter(subscription__topic_id=topic)
    assert its.count() == 3
    being_sent(its.filter(subscription_id=shop["globex"]["subscription"]["id"]))
    refused_status, deleted_status = TOPIC_DOORS[door]

    refused = topic_door(door, topic, shop, admin_client)
    text = refused.content.decode()
    assert refused.status_code == refused_status, text
    assert "subscriptions have 1 delivery being sent right now (in flight); nothing was deleted." in text
    assert Topic.objects.filter(id=topic).exists() and its.count() == 3
    assert Subscription.objects.filter(topic_id=topic).count() == 3 and Message.objects.filter(topic_id=topic)

    its.update(status="succeeded", lease_until=None)
    assert topic_door(door, topic, shop, admin_client).status_code == deleted_status
    assert not Topic.objects.filter(id=topic).exists() and not Subscription.objects.filter(topic_id=topic)
    assert not Message.objects.filter(topic_id=topic) and not its.exists()
    assert Topic.objects.filter(id=shop["internal"]["id"]).exists()
    assert Endpoint.objects.filter(url="http://127.0.0.1:9/acme").exists()


def test_a_send_whose_worker_died_is_not_waited_for(shop, user):
    sub = Subscription.objects.get(id=shop["acme"]["subscription"]["id"])
    publish("orders", {"n": 1}, owner=user, tenant="acme")
    mine = Delivery.objects.filter(subscription=sub)
    being_sent(mine)
    with pytest.raises(ApplicationError, match="1 delivery being sent") as refused:
        removal.subscription_delete(subscription=sub)
    assert refused.value.status_code == 409
    later = timezone.now() + timedelta(minutes=2)  # its lease ran out: its worker is gone
    removal.subscription_delete(subscription=sub, now=later)
    assert not Subscription.objects.filter(id=sub.id).exists() and not mine.exists()


@pytest.mark.django_db(transaction=True)
def test_a_delete_asked_for_while_the_receiver_is_answering_is_a_409_and_the_attempt_is_recorded(
        api, receiver, run_worker):
    """A real race: the receiver, while the worker waits for its answer, asks the API to delete the subscription
    and its topic. Both are refused; the worker records its attempt (the row is still there); then both go, with
    the attempts and dead letters the subscription had."""
    asked = []

    def answer(request):
        try:
            asked.extend(api.delete(path) for path in (f"/api/subscriptions/{subscription['id']}/",
                                                       f"/api/topics/{topic['id']}/"))
        finally:
            connections.close_all()  # this thread's connection: the test's database is dropped at the end
        return Reply(status=200)

    topic, subscription = subscribe(api, receiver, {"retryLimits": {"maxAttempts": 1}})
    first = publish_through_api(api, topic, 1)
    receiver.script = answer
    settle()
    assert [(answer.status_code, "1 delivery being sent" in answer.json()["detail"]) for answer in asked] == [
        (409, True), (409, True)]
    recorded = Delivery.objects.get(message_id=first["message_id"])
    assert recorded.status == "succeeded" and Attempt.objects.filter(delivery=recorded).count() == 1

    receiver.script = [Reply(status=500)]
    publish_through_api(api, topic, 2)
    settle()
    assert Delivery.objects.filter(subscription_id=subscription["id"], status="dead_lettered").count() == 1
    assert api.delete(f"/api/subscriptions/{subscription['id']}/").status_code == 204
    assert not Delivery.objects.exists() and not Attempt.objects.exists()
    assert api.delete(f"/api/topics/{topic['id']}/").status_code == 204
    assert not Message.objects.exists() and Endpoint.objects.filter(url=receiver.url).exists()

"""The lists' actions (console/actions.py): one service call per selected row, each refusal named with its row, the
rest counted (a service that answers a number, such as a redrive, counts that many)."""

import pytest

from delivery.engine.accounts import recovery
from delivery.models import Delivery
from subscriptions.models import Subscription
from tests.conftest import publish, settle
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import shown_messages
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)

SUBSCRIPTIONS = "/admin/herald_subscriptions/subscription/"


def act(admin_client, url: str, action: str, selected: list[int]):
    return admin_client.post(url, {"action": action, "_selected_action": selected}, follow=True)


def test_actions_call_the_services(admin_client, traffic, receiver, run_worker):
    _, subscription = traffic
    receiver.script = [Reply(status=200)]
    response = act(admin_client, SUBSCRIPTIONS, "redrive", [subscription["id"]])
    assert "Redrove 1 dead letter(s)." in response.content.decode()
    settle()
    assert not Delivery.objects.filter(status="dead_lettered").exists()

    act(admin_client, SUBSCRIPTIONS, "pause", [subscription["id"]])
    assert Subscription.objects.get(id=subscription["id"]).status == "paused"
    act(admin_client, SUBSCRIPTIONS, "resume", [subscription["id"]])
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"

    delivery = Delivery.objects.filter(status="succeeded").first()
    response = act(admin_client, "/admin/herald_delivery/delivery/", "retry_now", [delivery.id])
    assert "cannot be retried" in response.content.decode()


def test_a_refused_row_is_named_and_the_others_are_done(admin_client, api, redis_conn):
    topic = create_topic(api)
    confirmed = create_subscription(api, topic["id"], "http://127.0.0.1:9/a")
    paused = create_subscription(api, topic["id"], "http://127.0.0.1:9/b")
    recovery.subscription_pause(subscription=Subscription.objects.get(id=paused["id"]))

    response = act(admin_client, SUBSCRIPTIONS, "pause", [confirmed["id"], paused["id"]])

    assert shown_messages(response) == [
        ("warning", "orders → http://127.0.0.1:9/b: Only a confirmed subscription can be paused; this one is paused."),
        ("success", "Paused 1 subscription(s).")]
    assert set(Subscription.objects.values_list("status", flat=True)) == {"paused"}


def test_a_service_that_answers_a_number_counts_that_many(admin_client, api, redis_conn):
    topic = create_topic(api)
    two = create_subscription(api, topic["id"], "http://127.0.0.1:9/two")
    one = create_subscription(api, topic["id"], "http://127.0.0.1:9/one")
    for n in range(2):
        publish(api, topic, n)
    first_of_one = Delivery.objects.filter(subscription_id=one["id"]).order_by("id").first()
    for delivery in [*Delivery.objects.filter(subscription_id=two["id"]), first_of_one]:
        recovery.delivery_dead_letter(delivery=delivery)  # two dead letters of `two`, one of `one`

    response = act(admin_client, SUBSCRIPTIONS, "redrive", [two["id"], one["id"]])

    assert shown_messages(response) == [("success", "Redrove 3 dead letter(s).")]
    assert list(Delivery.objects.order_by("id").values_list("status", flat=True)) == ["pending"] * 4

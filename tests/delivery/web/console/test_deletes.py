"""Deleting from the console through the services (console/deletes.py): a delete the service refuses is shown on the
object's page, nothing deleted; the list's bulk delete goes row by row; the confirmation lists the records that go
with a row without asking for permission to delete them by hand."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery
from subscriptions.models import Endpoint, Subscription, Topic
from tests.conftest import publish
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import shown_messages

pytestmark = pytest.mark.django_db

TOPICS = "/admin/herald_subscriptions/topic/"
REFUSED = ("This topic's subscriptions have 1 delivery being sent right now (in flight); nothing was deleted. Try "
           "again when they are done (within their send's deadline), or pause its subscriptions first so that no new "
           "send starts.")


def topic_with_a_delivery(api, name: str, *, being_sent: bool) -> dict:
    topic = create_topic(api, name)
    create_subscription(api, topic["id"], f"http://127.0.0.1:9/{name}")
    publish(api, topic)
    if being_sent:  # as a worker's claim leaves it: in flight under a lease that has not run out
        Delivery.objects.filter(subscription__topic_id=topic["id"]).update(
            status="in_flight", lease_until=timezone.now() + timedelta(minutes=1))
    return topic


def test_a_refused_delete_is_shown_on_the_objects_page_and_deletes_nothing(admin_client, api, redis_conn):
    topic = topic_with_a_delivery(api, "sending", being_sent=True)
    response = admin_client.post(f"{TOPICS}{topic['id']}/delete/", {"post": "yes"})
    assert (response.status_code, response.url) == (302, f"{TOPICS}{topic['id']}/change/")
    assert shown_messages(admin_client.get(response.url)) == [("error", REFUSED)]
    assert Topic.objects.filter(id=topic["id"]).exists() and Delivery.objects.count() == 1


def test_the_bulk_delete_goes_row_by_row_each_refusal_shown_the_others_deleted(admin_client, api, redis_conn):
    sending = topic_with_a_delivery(api, "sending", being_sent=True)
    idle = topic_with_a_delivery(api, "idle", being_sent=False)
    response = admin_client.post(TOPICS, {"action": "delete_selected", "_selected_action": [sending["id"], idle["id"]],
                                          "post": "yes"}, follow=True)
    assert ("error", f"sending: {REFUSED}") in shown_messages(response)
    assert list(Topic.objects.values_list("name", flat=True)) == ["sending"]
    assert list(Subscription.objects.values_list("topic__name", flat=True)) == ["sending"]
    assert Endpoint.objects.count() == 2  # endpoints stay


def test_the_confirmation_lists_what_goes_without_asking_for_permission_to_delete_records(admin_client, api,
                                                                                        redis_conn):
    topic = topic_with_a_delivery(api, "idle", being_sent=False)
    page = admin_client.get(f"{TOPICS}{topic['id']}/delete/").content.decode()
    assert 'Are you sure you want to delete the topic "idle"? All of the following related items' in page
    assert "<li>Deliveries: 1</li>" in page and "<li>Subscriptions: 1</li>" in page
    assert "permission to delete the following types of objects" not in page
    listed = admin_client.post(TOPICS, {"action": "delete_selected", "_selected_action": [topic["id"]]})
    assert "Are you sure you want to delete the selected topic?" in listed.content.decode()
    assert "permission to delete the following types of objects" not in listed.content.decode()

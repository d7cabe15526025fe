"""The topics' page (console/topics.py): made and edited through the service the API calls, a policy refused with
its path named, the schedule of the policy shown beside it."""

import pytest

from subscriptions.models import Topic
from tests.delivery.web.api.calls import create_topic

pytestmark = pytest.mark.django_db

TOPICS = "/admin/herald_subscriptions/topic/"


def topic_form(user, name: str = "orders", **fields) -> dict:
    return {"owner": user.id, "name": name, "description": "", "delivery_policy": "", "message_retention_days": "",
            **fields}


def test_a_topic_is_made_through_the_service_and_a_second_of_its_name_refused(admin_client, user):
    made = admin_client.post(TOPICS + "add/", topic_form(user, description="Orders as they happen"))
    assert (made.status_code, made.url) == (302, TOPICS)
    topic = Topic.objects.get()
    assert (topic.owner, topic.name, topic.description, topic.open_to_tenants) == (
        user, "orders", "Orders as they happen", False)

    again = admin_client.post(TOPICS + "add/", topic_form(user, description="Orders as they happen"))
    assert again.status_code == 200
    assert "alice already has a topic named &#x27;orders&#x27;." in again.content.decode()
    different = admin_client.post(TOPICS + "add/", topic_form(user, description="Other words"))
    assert different.status_code == 200
    assert (f"You already have a topic named &#x27;orders&#x27; (id {topic.id}) with a different description; "
            f"change it with PATCH /api/topics/{topic.id}/.") in different.content.decode()
    assert list(Topic.objects.values_list("description", flat=True)) == ["Orders as they happen"]


def test_admin_refuses_invalid_policies(admin_client, api, user):
    topic = create_topic(api, "console", delivery_policy={"preset": "event-grid"})
    response = admin_client.post(f"{TOPICS}{topic['id']}/change/", topic_form(user, "console",
                                                                              delivery_policy='{"jitter": 7}'))
    assert response.status_code == 200 and "jitter: must be at most 0.5" in response.content.decode()
    assert Topic.objects.get(id=topic["id"]).delivery_policy == {"preset": "event-grid"}


def test_an_edit_is_written_by_the_service(admin_client, api, user):
    topic = create_topic(api, "console")
    saved = admin_client.post(f"{TOPICS}{topic['id']}/change/", topic_form(
        user, "console", delivery_policy='{"retrySchedule": {"delays": [60]}}', message_retention_days="7"))
    assert (saved.status_code, saved.url) == (302, TOPICS)
    stored = Topic.objects.get(id=topic["id"])
    assert (stored.delivery_policy, stored.message_retention_days) == ({"retrySchedule": {"delays": [60]}}, 7)


def test_a_stored_policy_the_rules_refuse_is_shown_as_invalid_not_a_broken_page(admin_client, api):
    topic = create_topic(api, "console")
    Topic.objects.filter(id=topic["id"]).update(delivery_policy={"jitter": 7})  # stored before the rule existed
    page = admin_client.get(f"{TOPICS}{topic['id']}/change/")
    assert page.status_code == 200 and "invalid policy: jitter: must be at most 0.5" in page.content.decode()

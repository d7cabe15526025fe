"""A subscription's transformation in the console (console/transformations.py): its field on the subscription's form
(code and a switch; empty code is none), and the "Test transformation" button, offered where one is saved, which runs
the saved code on the catalog's example of the event type or on a payload the operator pastes and shows the result
on its page; nothing is sent or stored."""

import pytest

from delivery.engine.accounts.subscribing import subscription_update
from delivery.models import Delivery
from delivery.web.console.transformations import TransformationField
from subscriptions.models import EventType, Subscription
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import buttons, form_errors, words

pytestmark = pytest.mark.django_db

SUBSCRIPTIONS = "/admin/herald_subscriptions/subscription/"
SLACK = ("function handler(webhook) {\n  webhook.payload = {text: 'New order ' + webhook.payload.id};\n"
         "  return webhook;\n}")


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Creating subscriptions through the API enqueues on the real test Redis."""


@pytest.fixture
def saved(api, user):
    """A subscription to order.created, whose catalog example is order ord_1, with the Slack-shaped handler."""
    EventType.objects.create(owner=user, name="order.created", example={"id": "ord_1"})
    created = create_subscription(api, create_topic(api)["id"], event_types=["order.created"])
    subscription = Subscription.objects.get(id=created["id"])
    return subscription_update(subscription=subscription, transformation={"code": SLACK})


def test_the_field_is_code_and_a_switch_and_empty_code_is_none():
    field = TransformationField()
    assert field.clean([SLACK, True]) == {"code": SLACK, "enabled": True}
    assert field.clean([SLACK, False]) == {"code": SLACK, "enabled": False}
    assert field.clean(["  \n", True]) is None and field.clean(["", False]) is None
    assert field.clean([SLACK.replace("\n", "\r\n"), True]) == {"code": SLACK, "enabled": True}  # as a browser posts
    stored = {"code": SLACK, "enabled": True}
    assert not field.has_changed(stored, [SLACK, True])
    assert field.has_changed(stored, [SLACK, False]) and field.has_changed(stored, ["", True])
    assert not field.has_changed(None, ["", True])  # an empty editor, its box ticked as it opens: nothing to write
    assert field.widget.decompress(None) == ["", True] and field.widget.decompress(stored) == [SLACK, True]


def test_the_button_is_offered_where_a_transformation_is_saved(admin_client, api, saved):
    assert "transformation-test" in buttons(admin_client.get(f"{SUBSCRIPTIONS}{saved.id}/change/").content.decode())
    plain = create_subscription(api, saved.topic_id, "http://127.0.0.1:9/plain")
    assert "transformation-test" not in buttons(admin_client.get(f"{SUBSCRIPTIONS}{plain['id']}/change/").content
                                                 .decode())


def test_the_button_runs_the_saved_code_on_the_catalogs_example(admin_client, saved):
    page = admin_client.post(f"{SUBSCRIPTIONS}{saved.id}/transformation-test/")
    shown = words(page.content.decode())
    assert page.status_code == 200
    assert "Method POST ; not cancelled." in shown
    assert '"text": "New order ord_1"' in page.content.decode().replace("&quot;", '"')
    assert 'name="event_type" value="order.created"' in page.content.decode()
    assert "ord_1" in page.content.decode().split('name="payload"')[1]  # the example it ran on, shown
    assert not Delivery.objects.exists()


def test_a_pasted_payload_a_cancel_and_a_failing_line_are_shown(admin_client, saved):
    url = f"{SUBSCRIPTIONS}{saved.id}/transformation-test/"
    page = admin_client.post(url, {"payload": '{"id": "ord_9"}'}).content.decode()
    assert '"text": "New order ord_9"' in page.replace("&quot;", '"')
    subscription_update(subscription=saved, transformation={
        "code": "function handler(webhook) {\n  webhook.cancel = true;\n  return webhook;\n}"})
    assert "cancelled : nothing would be sent" in words(admin_client.post(url).content.decode())
    subscription_update(subscription=saved, transformation={
        "code": "function handler(webhook) {\n  return webhook.payload.customer.name;\n}"})
    failed = words(admin_client.post(url, {"payload": "{}"}).content.decode())
    assert "Line 2: TypeError: Cannot read properties of undefined (reading 'name')" in failed.replace("&#x27;", "'")
    subscription_update(subscription=saved, transformation={"code": "function handler(webhook) { for (;;) {} }"})
    assert "timed out after 50 ms" in words(admin_client.post(url).content.decode())


def test_what_cannot_make_a_run_is_said_on_its_field(admin_client, saved):
    url = f"{SUBSCRIPTIONS}{saved.id}/transformation-test/"
    assert form_errors(admin_client.post(url, {"payload": "{not json"}).content.decode()) == {
        "payload": ["The payload is not JSON (JSONDecodeError)."]}
    assert form_errors(admin_client.post(url, {"event_type": "order.refunded"}).content.decode()) == {
        "payload": ["give a payload to test with: the event type &#x27;order.refunded&#x27; has no example in the "
                    "catalog"]}
    subscription_update(subscription=saved, transformation=None)
    assert form_errors(admin_client.post(url).content.decode()) == {
        "__all__": ["give the code to test: this subscription has no transformation saved"]}


def test_the_page_is_for_those_who_may_change_the_subscription(client, django_user_model, saved):
    viewer = django_user_model.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    client.force_login(viewer)
    assert client.post(f"{SUBSCRIPTIONS}{saved.id}/transformation-test/").status_code == 404
    assert client.post(f"{SUBSCRIPTIONS}999999/transformation-test/").status_code == 404

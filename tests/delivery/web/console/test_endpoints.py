"""The endpoints' page (console/endpoints.py): its health, subscriptions, recent attempts and transitions, read-only;
health changes only through the buttons and actions, which record who and why."""

import pytest

from delivery.models import Attempt
from subscriptions.models import Endpoint
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import buttons, shown_messages

pytestmark = pytest.mark.django_db

ENDPOINTS = "/admin/herald_subscriptions/endpoint/"


@pytest.mark.django_db(transaction=True)
def test_endpoint_page_has_buttons_not_save_and_shows_subscriptions_and_attempts(admin_client, traffic):
    topic, subscription = traffic
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    page = admin_client.get(f"{ENDPOINTS}{endpoint.id}/change/").content.decode()
    assert 'name="_save"' not in page and 'name="_continue"' not in page and "deletelink" not in page
    assert buttons(page) == ["disable", "freeze"]
    assert "subscriptions to this endpoint" in page.lower() and "console" in page
    assert 'id="herald-recent-attempts"' in page
    assert page.count('href="/admin/herald_delivery/attempt/') >= Attempt.objects.count()

    response = admin_client.post(f"{ENDPOINTS}{endpoint.id}/do/freeze/", follow=True)
    assert "Frozen" in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.state == "frozen" and endpoint.transitions.first().reason == "frozen by hand"
    page = admin_client.get(f"{ENDPOINTS}{endpoint.id}/change/").content.decode()
    assert buttons(page) == ["enable"]
    admin_client.post(f"{ENDPOINTS}{endpoint.id}/do/enable/")
    endpoint.refresh_from_db()
    assert endpoint.state == "active"


@pytest.fixture
def endpoint(api) -> Endpoint:
    subscription = create_subscription(api, create_topic(api)["id"], "http://127.0.0.1:9/hook")
    return Endpoint.objects.get(id=subscription["endpoint_id"])


def test_endpoints_are_neither_made_edited_nor_deleted_by_hand(admin_client, endpoint):
    page = admin_client.get(f"{ENDPOINTS}{endpoint.id}/change/").content.decode()
    assert 'name="url"' not in page and 'name="owner"' not in page
    assert admin_client.get(ENDPOINTS + "add/").status_code == 403
    assert admin_client.post(f"{ENDPOINTS}{endpoint.id}/delete/", {"post": "yes"}).status_code == 403
    assert Endpoint.objects.filter(id=endpoint.id).exists()


def test_an_endpoint_without_attempts_says_so(admin_client, endpoint):
    page = admin_client.get(f"{ENDPOINTS}{endpoint.id}/change/").content.decode()
    assert "No attempts yet." in page and 'id="herald-recent-attempts"' not in page


def test_the_lists_actions_record_the_operator_and_say_how_many(admin_client, admin_user, endpoint):
    frozen = admin_client.post(ENDPOINTS, {"action": "freeze", "_selected_action": [endpoint.id]}, follow=True)
    assert shown_messages(frozen) == [("success", "Froze 1 endpoint(s).")]
    enabled = admin_client.post(ENDPOINTS, {"action": "enable", "_selected_action": [endpoint.id]}, follow=True)
    assert shown_messages(enabled) == [("success", "Enabled 1 endpoint(s).")]
    assert list(endpoint.transitions.order_by("id").values_list("to_state", "reason", "actor")) == [
        ("frozen", "frozen by hand", admin_user.id), ("active", "enabled by hand", admin_user.id)]


def test_no_endpoint_and_no_subscription_is_added_by_hand(admin_client):
    """An endpoint comes with its subscription, and a subscription through the API or Python (its URL checked and
    confirmed): the console has no add page for either."""
    assert admin_client.get(f"{ENDPOINTS}add/").status_code == 403
    assert admin_client.get("/admin/herald_subscriptions/subscription/add/").status_code == 403

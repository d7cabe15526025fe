"""Buttons on an object's page (console/buttons.py): offered where they apply, each a POST that calls its service
and comes back to the page saying what was done or why not, answered only to a user who may change the object."""

import pytest
from django.contrib.auth.models import Permission

from delivery.engine.accounts import recovery
from subscriptions.models import Endpoint, Subscription
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import buttons, shown_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def subscription(api):
    return create_subscription(api, create_topic(api)["id"], "http://127.0.0.1:9/hook")


def endpoint_page(subscription) -> str:
    return f"/admin/herald_subscriptions/endpoint/{subscription['endpoint_id']}/"


def test_a_button_calls_its_service_and_comes_back_saying_what_it_did(admin_client, admin_user, subscription):
    page = endpoint_page(subscription)
    response = admin_client.post(page + "do/freeze/")
    assert (response.status_code, response.url) == (302, page + "change/")
    followed = admin_client.get(response.url)
    assert shown_messages(followed) == [("success", "Frozen: nothing is sent until it is enabled.")]
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    assert endpoint.state == "frozen"
    assert (endpoint.transitions.get().reason, endpoint.transitions.get().actor) == ("frozen by hand", admin_user)


def test_only_the_buttons_that_apply_are_offered_each_posting_to_its_url(admin_client, subscription):
    page = endpoint_page(subscription)
    active = admin_client.get(page + "change/").content.decode()
    assert buttons(active) == ["disable", "freeze"]
    assert f'<form method="post" action="{page}do/freeze/">' in active
    admin_client.post(page + "do/disable/")
    disabled = admin_client.get(page + "change/").content.decode()
    assert buttons(disabled) == ["enable", "freeze"]
    assert 'title="Active again: counters reset, held deliveries released."' in disabled


def test_a_refusal_is_shown_as_a_warning_and_changes_nothing(admin_client, subscription):
    recovery.subscription_pause(subscription=Subscription.objects.get(id=subscription["id"]))
    page = f"/admin/herald_subscriptions/subscription/{subscription['id']}/"
    response = admin_client.post(page + "do/pause/", follow=True)
    assert response.redirect_chain == [(page + "change/", 302)]
    assert shown_messages(response) == [
        ("warning", "Pause: Only a confirmed subscription can be paused; this one is paused.")]
    assert Subscription.objects.get(id=subscription["id"]).status == "paused"


def test_a_button_answers_a_post_naming_a_button_and_an_object_that_exist(admin_client, subscription):
    page = endpoint_page(subscription)
    assert admin_client.get(page + "do/freeze/").status_code == 405
    assert admin_client.post(page + "do/nothing/").status_code == 404
    assert admin_client.post(f"/admin/herald_subscriptions/endpoint/{subscription['endpoint_id'] + 1}/do/freeze/"
                             ).status_code == 404
    assert Endpoint.objects.get(id=subscription["endpoint_id"]).state == "active"


def test_a_user_who_may_only_view_gets_the_answer_for_a_missing_object(client, django_user_model, subscription):
    viewer = django_user_model.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(content_type__app_label="herald_subscriptions",
                                                       codename="view_endpoint"))
    page = endpoint_page(subscription)
    assert client.post(page + "do/freeze/").url == f"/admin/login/?next={page}do/freeze/"  # not signed in
    client.force_login(viewer)
    assert client.get(page + "change/").status_code == 200
    assert client.post(page + "do/freeze/").status_code == 404
    assert Endpoint.objects.get(id=subscription["endpoint_id"]).state == "active"


def test_a_page_of_records_has_no_save_or_delete_and_one_that_is_edited_keeps_them(admin_client, subscription):
    endpoint = admin_client.get(endpoint_page(subscription) + "change/").content.decode()
    assert 'name="_save"' not in endpoint and "deletelink" not in endpoint
    edited = admin_client.get(f"/admin/herald_subscriptions/subscription/{subscription['id']}/change/")
    assert 'name="_save"' in edited.content.decode() and "deletelink" in edited.content.decode()

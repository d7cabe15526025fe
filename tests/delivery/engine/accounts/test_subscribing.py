"""A subscription's options are one list (rules/subscription_rules.UPDATABLE) that every door writes through the
services (engine/accounts/subscribing.py): the API offers exactly those (with the topic and a secret of one's own at
create), the console a part of them, and the service refuses any other name, whoever calls it."""

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.auth import get_user_model
from django.test import RequestFactory

from delivery.engine.accounts.subscribing import subscription_create, subscription_update, topic_create
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules.subscription_rules import UPDATABLE
from delivery.web.api.subscriptions.shapes import SubscriptionSerializer
from subscriptions.models import Subscription

pytestmark = pytest.mark.django_db


def test_the_api_writes_the_options_and_nothing_else():
    writable = {name for name, field in SubscriptionSerializer().fields.items() if not field.read_only}
    assert writable == {"topic", "secret", *UPDATABLE}


def test_the_console_edits_only_options_the_service_takes():
    request = RequestFactory().get("/admin/")
    request.user = get_user_model()(is_superuser=True, is_staff=True, is_active=True)
    page = admin.site._registry[Subscription]
    fields = set(flatten_fieldsets(page.get_fieldsets(request, Subscription())))
    editable = fields - set(page.get_readonly_fields(request, Subscription()))
    renamed = set(page.form.renamed.values())  # fields the form names otherwise
    assert editable - renamed <= set(UPDATABLE) and editable - renamed
    assert renamed == {"new_secret"}  # a rotation, by its own service


def test_the_service_refuses_what_is_no_option(django_user_model):
    topic, _ = topic_create(owner=django_user_model.objects.create_user("alice"), name="orders")
    subscription, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/hook")
    for name, value in (("status", "confirmed"), ("topic", topic), ("secret", "whsec_x"), ("owner_id", 3)):
        with pytest.raises(ApplicationError) as refused:
            subscription_update(subscription=subscription, **{name: value})
        assert (refused.value.field, str(refused.value)) == (
            name, f"not an option of a subscription one can set: {name}")
    assert Subscription.objects.get().status == subscription.status
    assert subscription_update(subscription=subscription, max_events_per_batch=5).max_events_per_batch == 5
    with pytest.raises(ApplicationError) as refused:
        subscription_create(topic=topic, endpoint="http://127.0.0.1:9/other", keys_id="x", status="confirmed")
    assert (refused.value.field, str(refused.value)) == (
        "keys_id", "not an option of a subscription one can set: keys_id, status")
    assert Subscription.objects.count() == 1

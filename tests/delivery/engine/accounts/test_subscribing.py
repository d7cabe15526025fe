"""A subscription's options are one list (rules/subscription_rules.UPDATABLE) that every door writes through the
services (engine/accounts/subscribing.py): the API offers exactly those (with the topic and a secret of one's own at
create), the console a part of them, and the service refuses any other name, whoever calls it. A transformation's
code is compiled when it is stored, and refused with its line; a tenant's needs its owner's leave."""

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.auth import get_user_model
from django.test import RequestFactory

from delivery.engine.accounts import tenancy
from delivery.engine.accounts.subscribing import subscription_create, subscription_update, topic_create
from delivery.engine.accounts.tenancy import NOT_ALLOWED
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules.subscription_rules import UPDATABLE
from delivery.web.api.subscriptions.shapes import SubscriptionSerializer
from subscriptions.models import Subscription, Topic

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


# A transformation (rules/subscription_rules.transformation_problem) is compiled when it is stored, whoever stores it.
HANDLER = ("function handler(webhook) {\n  webhook.payload = {text: 'New order ' + webhook.payload.id};\n"
           "  return webhook;\n}")
UNFINISHED = "function handler(webhook) {\n  return webhook +\n}"


@pytest.fixture
def subscription(django_user_model):
    topic, _ = topic_create(owner=django_user_model.objects.create_user("alice"), name="orders")
    return subscription_create(topic=topic, endpoint="http://127.0.0.1:9/hook")[0]


def test_a_transformation_is_saved_enabled_unless_it_says_otherwise(subscription):
    saved = subscription_update(subscription=subscription, transformation={"code": HANDLER})
    assert Subscription.objects.get(id=saved.id).transformation == {"code": HANDLER, "enabled": True}
    subscription_update(subscription=saved, transformation={"code": HANDLER, "enabled": False})
    assert Subscription.objects.get(id=saved.id).transformation == {"code": HANDLER, "enabled": False}
    subscription_update(subscription=saved, transformation=None)
    assert Subscription.objects.get(id=saved.id).transformation is None


@pytest.mark.parametrize("code, reason", [
    (UNFINISHED, "line 3: SyntaxError: Unexpected token '}'"),
    ("const handle = (webhook) => webhook;", "the code defines no function handler(webhook)"),
    ("function handler(webhook) { return webhook; }\nthrow new Error('at load');",
     "line 2: Error: at load"),
    ("x" * 65_537, "the code is larger than 65536 bytes (HERALD_TRANSFORM_CODE_MAX_BYTES)"),
])
def test_code_that_cannot_run_is_refused_with_its_line_and_nothing_is_written(subscription, code, reason):
    with pytest.raises(ApplicationError) as refused:
        subscription_update(subscription=subscription, transformation={"code": code}, max_events_per_batch=1,
                            event_types=["order.created"])
    assert (refused.value.field, refused.value.message, refused.value.status_code) == ("transformation", reason, 400)
    stored = Subscription.objects.get(id=subscription.id)
    assert (stored.transformation, stored.event_types) == (None, [])


def test_a_subscription_is_made_with_a_transformation_or_refused_whole(subscription):
    topic = subscription.topic
    made, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/slack", transformation={"code": HANDLER})
    assert made.transformation == {"code": HANDLER, "enabled": True}
    with pytest.raises(ApplicationError) as refused:
        subscription_create(topic=topic, endpoint="http://127.0.0.1:9/other", transformation={"code": UNFINISHED})
    assert refused.value.as_payload() == {"transformation": ["line 3: SyntaxError: Unexpected token '}'"]}
    with pytest.raises(ApplicationError) as refused:
        subscription_create(topic=topic, endpoint="http://127.0.0.1:9/other", transformation={"code": HANDLER},
                            max_events_per_batch=10)
    assert refused.value.field == "transformation" and "CloudEvents batches" in refused.value.message
    assert Subscription.objects.count() == 2


def test_a_transformation_and_batches_are_refused_in_either_order(subscription):
    batching = subscription_update(subscription=subscription, max_events_per_batch=10)
    with pytest.raises(ApplicationError) as refused:
        subscription_update(subscription=batching, transformation={"code": HANDLER})
    assert refused.value.field == "transformation" and "CloudEvents batches" in refused.value.message
    unbatched = subscription_update(subscription=batching, max_events_per_batch=1, transformation={"code": HANDLER})
    with pytest.raises(ApplicationError) as refused:
        subscription_update(subscription=unbatched, max_events_per_batch=10)
    assert refused.value.field == "max_events_per_batch" and "CloudEvents batches" in refused.value.message
    assert Subscription.objects.get(id=subscription.id).max_events_per_batch == 1


def test_a_tenants_transformation_needs_its_owners_leave_to_be_set_not_to_be_removed(subscription):
    owner = subscription.topic.owner
    tenant, _ = tenancy.tenant_create(owner=owner, external_id="acme")
    Topic.objects.filter(id=subscription.topic_id).update(open_to_tenants=True)
    topic = Topic.objects.get(id=subscription.topic_id)
    with pytest.raises(ApplicationError) as refused:
        subscription_create(topic=topic, endpoint="http://127.0.0.1:9/acme", tenant=tenant,
                            transformation={"code": HANDLER})
    assert (refused.value.status_code, refused.value.field, refused.value.message) == (
        403, "transformation", NOT_ALLOWED)
    acmes, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/acme", tenant=tenant)
    tenancy.portal_update(owner=owner, allow_transformations=True)
    acmes = subscription_update(subscription=acmes, transformation={"code": HANDLER})
    tenancy.portal_update(owner=owner, allow_transformations=False)
    with pytest.raises(ApplicationError):
        subscription_update(subscription=acmes, transformation={"code": HANDLER, "enabled": False})
    assert subscription_update(subscription=acmes, transformation=None).transformation is None
    assert subscription_update(subscription=subscription, transformation={"code": HANDLER}).transformation  # owner's

"""A transformation's test-run, the same through every door (delivery/web/transformation_trials.py): the code given or
saved, on the payload given or the catalog's example of the event type (for a tenant, only a type open to tenants),
the event type given or the subscription's first exact one; nothing sent or stored. (The doors' own tests: the API's
test_views, the console's test_transformations, the portal's test_actions.)"""

import pytest

from delivery.engine.accounts import tenancy
from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Delivery, Message
from delivery.transport.sandbox import Outcome
from delivery.web import transformation_trials
from delivery.web.transformation_trials import answer, catalog_example, first_event_type, trial
from subscriptions.models import EventType, Subscription

pytestmark = pytest.mark.django_db

ECHO = "function handler(webhook) {\n  webhook.payload = [webhook.eventType, webhook.payload];\n  return webhook;\n}"


@pytest.fixture
def catalog(user):
    """Alice's topic open to tenants, a catalog of an open and a closed type, and tenant Acme."""
    EventType.objects.create(owner=user, name="order.created", example={"id": "ord_1"})
    EventType.objects.create(owner=user, name="audit.logged", example={"who": "ops"}, open_to_tenants=False)
    topic, _ = topic_create(owner=user, name="orders", open_to_tenants=True)
    acme, _ = tenancy.tenant_create(owner=user, external_id="acme")
    return {"topic": topic, "acme": acme}


def subscribed(catalog, name: str, *event_types, tenant=None, **options) -> Subscription:
    """A new subscription of `catalog`'s topic, its endpoint named `name`."""
    return subscription_create(topic=catalog["topic"], endpoint=f"http://127.0.0.1:9/{name}", tenant=tenant,
                               event_types=list(event_types), **options)[0]


def test_the_first_exact_event_type_is_the_default(catalog):
    assert first_event_type(subscribed(catalog, "s2", "order.created", "audit.logged")) == "order.created"
    assert first_event_type(subscribed(catalog, "s3", "order.*", "order.created")) == ""  # a pattern: no one type
    assert first_event_type(subscribed(catalog, "s4")) == ""


def test_the_given_code_payload_and_event_type_run_and_nothing_is_recorded(catalog):
    subscription = subscribed(catalog, "s5", "order.created")
    outcome = trial(subscription, code=ECHO, payload={"id": 5}, event_type="order.paid")
    assert outcome == Outcome(payload=["order.paid", {"id": 5}], method="POST")
    assert trial(subscription, code=ECHO, payload=None).payload == ["order.created", None]  # null is a payload
    assert trial(subscription, code=ECHO).payload == ["order.created", {"id": "ord_1"}]  # the catalog's example
    assert not Message.objects.exists() and not Delivery.objects.exists()


def test_the_saved_code_is_the_default_and_none_saved_is_a_400_on_code(catalog):
    saved = subscribed(catalog, "s6", "order.created", transformation={"code": ECHO, "enabled": False})
    assert trial(saved).payload == ["order.created", {"id": "ord_1"}]  # switched off, it can still be tried
    with pytest.raises(ApplicationError) as refused:
        trial(subscribed(catalog, "s7", "order.created"), payload={})
    assert (refused.value.field, refused.value.message) == ("code", transformation_trials.NO_CODE)


def test_a_tenant_tries_only_where_its_owner_allows_and_only_on_examples_it_may_see(catalog, user):
    acmes = subscribed(catalog, "s8", "order.created", tenant=catalog["acme"])
    with pytest.raises(ApplicationError) as refused:
        trial(acmes, code=ECHO, payload={})
    assert (refused.value.status_code, refused.value.field) == (403, "transformation")
    tenancy.portal_update(owner=user, allow_transformations=True)
    assert trial(acmes, code=ECHO).payload == ["order.created", {"id": "ord_1"}]
    assert catalog_example(acmes, "audit.logged") is None  # closed to tenants: as if it had none
    with pytest.raises(ApplicationError) as refused:
        trial(acmes, code=ECHO, event_type="audit.logged")
    assert refused.value.field == "payload" and "'audit.logged' has no example" in refused.value.message
    owners = subscribed(catalog, "s9", "audit.logged")
    assert catalog_example(owners, "audit.logged") == {"who": "ops"}


def test_the_answer_says_what_would_be_sent_or_why_not():
    assert answer(Outcome(payload={"a": 1}, method="PUT", cancel=True)) == {
        "ok": True, "method": "PUT", "payload": {"a": 1}, "cancelled": True}
    assert answer(Outcome(error="SyntaxError: Unexpected end of input", line=4)) == {
        "ok": False, "error": "SyntaxError: Unexpected end of input", "line": 4}

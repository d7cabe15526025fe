"""Event versions through a real worker and a real receiver (docs/versions.md): an endpoint pinned to an older
version receives the payload brought down through the chain of down-converters, another the latest; the version
goes along as a header and a CloudEvents attribute; adding a version pins the subscriptions that followed the
latest; a publish names the version its payload is in."""

import json

import pytest

from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.engine.accounts.subscribing import subscription_create, subscription_update
from delivery.engine.plumbing.errors import ApplicationError
from delivery.events import PublishError, publish
from delivery.models import Attempt, Delivery
from subscriptions.models import Subscription, Topic
from tests.conftest import drain
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)
# 2026-01: {name}; 2026-06: {full_name} (renamed); 2026-11: {customer: {full_name}} (nested)
TO_JANUARY = "function handler(w) { w.payload = {name: w.payload.full_name}; return w; }"
TO_JUNE = "function handler(w) { w.payload = {full_name: w.payload.customer.full_name}; return w; }"


@pytest.fixture
def catalog(user):
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01", example={"name": "Ada"})
    return customer


def test_each_endpoint_receives_the_version_it_is_pinned_to(user, catalog, redis_conn):
    topic = Topic.objects.create(owner=user, name="customers")
    old_receiver, new_receiver = Receiver(), Receiver()
    try:
        old, _ = subscription_create(topic=topic, endpoint=old_receiver.url)
        assert old.event_version == "2026-01-01"  # the latest when it was made
        event_version_create(event_type=catalog, name="2026-06-01", down_converter=TO_JANUARY)
        event_version_create(event_type=catalog, name="2026-11-01", down_converter=TO_JUNE)
        new, _ = subscription_create(topic=topic, endpoint=new_receiver.url)
        assert new.event_version == "2026-11-01"
        message = publish(topic, {"customer": {"full_name": "Grace Hopper"}}, event_type="customer.created")
        assert message.event_version == "2026-11-01"  # a publish names none: the latest
        drain()
        down = old_receiver.wait_for(1)[0]
        assert down.json()["data"] == {"name": "Grace Hopper"}  # 2026-11 → 2026-06 → 2026-01
        assert down.json()["eventversion"] == "2026-01-01" and down.headers["herald-event-version"] == "2026-01-01"
        latest = new_receiver.wait_for(1)[0]
        assert latest.json()["data"] == {"customer": {"full_name": "Grace Hopper"}}
        assert latest.headers["herald-event-version"] == "2026-11-01"
        stored = Attempt.objects.get(delivery__subscription=old)
        assert json.loads(stored.request_body)["data"] == {"name": "Grace Hopper"}  # what was sent is stored
    finally:
        old_receiver.close()
        new_receiver.close()


def test_adding_a_version_pins_the_subscriptions_that_followed_the_latest(user, receiver, redis_conn):
    topic = Topic.objects.create(owner=user, name="customers")
    following, _ = subscription_create(topic=topic, endpoint=receiver.url)
    assert following.event_version == ""  # no versions yet: it follows the latest
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01")
    assert Subscription.objects.get(pk=following.pk).event_version == ""  # one version: nothing to keep it from
    event_version_create(event_type=customer, name="2026-06-01", down_converter=TO_JANUARY)
    assert Subscription.objects.get(pk=following.pk).event_version == "2026-01-01"
    publish(topic, {"full_name": "Ada Lovelace"}, event_type="customer.created")
    drain()
    assert receiver.wait_for(1)[0].json()["data"] == {"name": "Ada Lovelace"}  # not the shape it was not built for


def test_a_publish_in_an_older_version_and_one_in_a_version_that_does_not_exist(user, catalog, receiver, redis_conn):
    topic = Topic.objects.create(owner=user, name="customers")
    event_version_create(event_type=catalog, name="2026-06-01", down_converter=TO_JANUARY)
    subscription, _ = subscription_create(topic=topic, endpoint=receiver.url)  # pinned to 2026-06-01
    publish(topic, {"name": "Ada"}, event_type="customer.created", event_version="2026-01-01")
    drain()
    sent = receiver.wait_for(1)[0]  # no up-converters: as published, saying its version
    assert sent.json()["data"] == {"name": "Ada"} and sent.headers["herald-event-version"] == "2026-01-01"
    with pytest.raises(PublishError, match="is not a version of 'customer.created'"):
        publish(topic, {"name": "x"}, event_type="customer.created", event_version="2030-01-01")
    with pytest.raises(PublishError, match="has no versions"):
        publish(topic, {"x": 1}, event_type="order.created", event_version="2026-01-01")


def test_a_failing_down_converter_dead_letters_with_its_name(user, catalog, receiver, redis_conn):
    topic = Topic.objects.create(owner=user, name="customers")
    subscription, _ = subscription_create(topic=topic, endpoint=receiver.url)
    event_version_create(event_type=catalog, name="2026-06-01",
                         down_converter="function handler(w) {\n  w.payload = w.payload.missing.name;\n}")
    publish(topic, {"full_name": "Ada"}, event_type="customer.created")
    drain()
    delivery = Delivery.objects.get()
    assert delivery.status == "dead_lettered" and delivery.dead_letter_reason == "transformation_failed"
    assert delivery.attempts.get().error_detail.startswith(
        "transformation_failed: down-converter of 2026-06-01: line 2: TypeError")
    assert receiver.requests == []


def test_a_version_and_a_pin_are_checked(user, catalog):
    with pytest.raises(ApplicationError) as refused:
        event_version_create(event_type=catalog, name="2026-06-01", down_converter="function handler(w) { return w")
    assert "line 1: SyntaxError" in str(refused.value.as_payload())
    with pytest.raises(ApplicationError, match="come in order"):
        event_version_create(event_type=catalog, name="2025-01-01", down_converter=TO_JANUARY)
    topic = Topic.objects.create(owner=user, name="customers")
    subscription, _ = subscription_create(topic=topic, endpoint="https://hooks.example/customers")
    with pytest.raises(ApplicationError, match="not a version of any event type"):
        subscription_update(subscription=subscription, event_version="1999-01-01")
    assert subscription_update(subscription=subscription, event_version="").event_version == ""

"""Announcing (delivery/engine/state/announce.py) on its own: signals after commit only, as committed, nothing read
without a receiver; Herald's operational events are one receiver among others."""

import pytest
from django.db import transaction

from delivery import signals
from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.intake import operational
from delivery.engine.intake.publishing import message_publish
from delivery.engine.state import announce
from delivery.models import Delivery
from subscriptions.models import Endpoint

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def delivery(user, redis_conn):
    topic, _ = topic_create(owner=user, name="heard")
    subscription_create(topic=topic, endpoint="http://127.0.0.1:9/hook")
    message_publish(topic=topic, payload={})
    return Delivery.objects.get()


@pytest.fixture
def heard():
    found = []

    def on_success(sender, delivery, **kwargs):
        found.append(("succeeded", delivery.id))

    def on_dead(sender, delivery, reason, **kwargs):
        found.append(("dead_lettered", delivery.id, reason))

    def on_endpoint(sender, endpoint, from_state, to_state, reason, **kwargs):
        found.append((endpoint.id, from_state, to_state, reason))

    signals.delivery_succeeded.connect(on_success)
    signals.delivery_dead_lettered.connect(on_dead)
    signals.endpoint_state_changed.connect(on_endpoint)
    yield found
    signals.delivery_succeeded.disconnect(on_success)
    signals.delivery_dead_lettered.disconnect(on_dead)
    signals.endpoint_state_changed.disconnect(on_endpoint)


def test_finished_deliveries_are_announced_after_commit_as_committed(delivery, heard):
    with transaction.atomic():
        Delivery.objects.filter(id=delivery.id).update(status="succeeded")
        announce.deliveries_finished({delivery.id: "succeeded"})
        assert heard == []
    assert heard == [("succeeded", delivery.id)]
    heard.clear()
    with transaction.atomic():
        announce.deliveries_finished({delivery.id: "dead_lettered"})  # the row says succeeded: not announced as dead
    assert heard == []


def test_a_rolled_back_change_is_never_announced(delivery, heard):
    with pytest.raises(RuntimeError), transaction.atomic():
        Delivery.objects.filter(id=delivery.id).update(status="succeeded")
        announce.deliveries_finished({delivery.id: "succeeded"})
        raise RuntimeError
    assert heard == []


def test_without_a_receiver_nothing_is_read(delivery, django_assert_num_queries):
    assert not signals.delivery_succeeded.has_listeners(Delivery)
    with django_assert_num_queries(0):
        announce.deliveries_finished({delivery.id: "succeeded"})


def test_a_failing_receiver_does_not_keep_the_others_from_hearing(delivery, heard):
    def broken(sender, **kwargs):
        raise ValueError("a receiver's own bug")

    signals.delivery_succeeded.connect(broken)
    try:
        Delivery.objects.filter(id=delivery.id).update(status="succeeded")
        announce.deliveries_finished({delivery.id: "succeeded"})
    finally:
        signals.delivery_succeeded.disconnect(broken)
    assert heard == [("succeeded", delivery.id)]


def test_endpoint_changes_are_announced_and_operational_events_are_a_receiver(delivery, heard):
    endpoint = Endpoint.objects.get()
    with transaction.atomic():
        announce.endpoint_changed(endpoint, "active", "disabled", "5 failures")
        assert heard == []
    assert heard == [(endpoint.id, "active", "disabled", "5 failures")]
    receivers = [r[1]() for r in signals.endpoint_state_changed.receivers]
    assert operational.on_endpoint_state_changed in receivers
    assert operational.on_delivery_dead_lettered in [r[1]() for r in signals.delivery_dead_lettered.receivers]

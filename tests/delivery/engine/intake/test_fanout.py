"""Large topics: publishing answers at once and a fan-out job writes the deliveries, losing none."""

import pytest

from delivery.engine.intake.fanout import fan_out
from delivery.engine.scheduler import dispatch
from delivery.models import Delivery, Message
from subscriptions.models import Endpoint, Subscription
from tests.conftest import publish, settle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def large_topic(api, user, receiver, settings):
    settings.HERALD_INLINE_FANOUT = 3
    topic = api.post("/api/topics/", {"name": "large"}, format="json").json()
    for n in range(6):
        endpoint = Endpoint.objects.create(owner=user, url=f"{receiver.url}/{n}")
        Subscription.objects.create(topic_id=topic["id"], endpoint=endpoint, status="confirmed",
                                    filter_policy={"region": ["eu"]} if n == 5 else None)
    return topic


def test_publish_hands_a_large_fan_out_to_a_job(api, large_topic, receiver, run_worker):
    body = publish(api, large_topic, {"big": True})
    assert body["deliveries"] == 5  # the eu-only subscription does not match
    assert Delivery.objects.count() == 0 and Message.objects.get().fanout_pending

    settle()

    assert Delivery.objects.filter(status="succeeded").count() == 5
    assert not Message.objects.get().fanout_pending
    assert len({r.path for r in receiver.wait_for(5)}) == 5


def test_a_fan_out_lost_with_redis_is_redone_by_the_reconciler(api, large_topic, receiver, run_worker, redis_conn):
    publish(api, large_topic, 1)
    redis_conn.flushall()
    Message.objects.update(published_at=Message.objects.get().published_at.replace(year=2000))

    assert dispatch.reconcile()["lost_fan_outs"] == 1
    run_worker()  # runs the re-queued fan-out job (idempotence: test_the_fan_out_job_is_idempotent)
    assert Delivery.objects.count() == 5


def test_the_fan_out_job_is_idempotent(api, large_topic):

    publish(api, large_topic, 1)
    message = Message.objects.get()
    assert fan_out(str(message.id)) == 5
    Message.objects.update(fanout_pending=True)
    assert fan_out(str(message.id)) == 5
    assert Delivery.objects.count() == 5

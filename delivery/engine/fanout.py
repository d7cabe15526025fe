"""Which subscriptions a message goes to, and creating its deliveries: inline for small topics, by a job for
large ones, so that publishing answers quickly whatever the fan-out size.

Every subscription of the topic is decided on at publish time, and the ones that get no delivery are recorded on
the message (`Message.fanout_skipped`): filtered out (by which attribute), not confirmed. A paused subscription gets
a held delivery and is recorded as paused too. Ids are stored grouped by outcome, so a topic of 10,000 subscriptions
costs one JSON value of ids, not 10,000 rows.

The fan-out job is idempotent (one delivery per message and subscription, conflicts ignored), and a message
whose job was lost (Redis flushed) is found by the reconciler through `fanout_pending` and fanned out again.
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from delivery.conf import herald
from delivery.engine import redis_link, transitions
from delivery.engine.queues import DELIVERIES, want_pump
from delivery.models import Delivery, Message
from delivery.rules.filter_policy import failing_key
from delivery.rules.vocabulary import AttemptQueue
from subscriptions.models import Subscription

log = logging.getLogger(__name__)
CHUNK = 1000
LIVE = (Subscription.Status.CONFIRMED, Subscription.Status.PAUSED)


class Outcome:
    """What publishing decided for one subscription (the values of the API's `fanout[].outcome`)."""

    DELIVERY = "delivery_created"
    PAUSED = "paused"  # a delivery, held until the subscription resumes
    FILTERED_OUT = "filtered_out"
    NOT_CONFIRMED = "not_confirmed"
    SUBSCRIBED_AFTER = "subscribed_after_publish"
    PENDING = "fan_out_pending"  # a large fan-out's job has not written it yet
    UNRECORDED = "not_recorded"  # published before decisions were recorded


def topic_subscriptions(topic_id: int) -> list[tuple]:
    """(subscription id, endpoint id, status, filter policy) of every subscription of the topic."""
    return list(Subscription.objects.filter(topic_id=topic_id).values_list(
        "id", "endpoint_id", "status", "filter_policy"))


def decide(subscriptions: list[tuple], attributes: dict) -> tuple[list[tuple[int, int, str]], dict]:
    """(chosen, skipped): (subscription id, endpoint id, status) of the live subscriptions whose filter matches, and
    the record of the others, {"filtered_out": {attribute: [ids]}, "not_confirmed": [ids], "paused": [ids]}."""
    chosen, filtered, unconfirmed, paused = [], {}, [], []
    for sid, eid, status, policy in subscriptions:
        if status not in LIVE:
            unconfirmed.append(sid)
            continue
        key = failing_key(policy, attributes)
        if key is not None:
            filtered.setdefault(key, []).append(sid)
            continue
        chosen.append((sid, eid, status))
        if status == Subscription.Status.PAUSED:
            paused.append(sid)
    skipped = {name: ids for name, ids in ((Outcome.FILTERED_OUT, filtered), (Outcome.NOT_CONFIRMED, unconfirmed),
                                           (Outcome.PAUSED, paused)) if ids}
    return chosen, skipped


def targets(topic_id: int, attributes: dict) -> list[tuple[int, int, str]]:
    """(subscription id, endpoint id, status) of every live subscription whose filter matches the attributes."""
    return decide(topic_subscriptions(topic_id), attributes)[0]


def build(message: Message, chosen: list[tuple[int, int, str]]) -> list[Delivery]:
    """Unsaved deliveries; a paused subscription's are held (no due time) until it resumes."""
    return [Delivery(message=message, subscription_id=sid, endpoint_id=eid,
                     **transitions.initial(due=None if status == Subscription.Status.PAUSED else message.published_at))
            for sid, eid, status in chosen]


def enqueue_fan_out(message_id) -> None:
    try:
        redis_link.queue(AttemptQueue.DELIVERIES).enqueue(fan_out, str(message_id), result_ttl=0,
                                                  job_timeout=herald.JOB_TIMEOUT_SECONDS)
    except Exception:  # Redis down: the reconciler finds the message by fanout_pending
        log.exception("could not enqueue the fan-out of message %s; the reconciler will retry", message_id)


def fan_out(message_id: str) -> int:
    """The RQ job: create the message's deliveries in chunks, then ask for a pump to send them."""
    message = Message.objects.filter(id=message_id, fanout_pending=True).first()
    if message is None:
        return 0
    chosen = targets(message.topic_id, message.attributes)
    for start in range(0, len(chosen), CHUNK):
        with transaction.atomic():
            Delivery.objects.bulk_create(build(message, chosen[start:start + CHUNK]), ignore_conflicts=True)
    Message.objects.filter(id=message.id).update(fanout_pending=False)
    want_pump(DELIVERIES)
    return len(chosen)


def requeue_lost_fan_outs(now=None) -> int:
    now = now or timezone.now()
    stale = now - timedelta(seconds=herald.RECONCILE_AFTER_SECONDS)
    lost = list(Message.objects.filter(fanout_pending=True, published_at__lt=stale).values_list("id", flat=True)[:100])
    for message_id in lost:
        enqueue_fan_out(message_id)
    return len(lost)

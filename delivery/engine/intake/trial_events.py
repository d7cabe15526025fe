"""Test events: `herald.test` to one subscription alone, asked for by its owner or tenant (API, portal, admin), with
the catalog's example of one of its event types when there is one; delivered and recorded like any other, within
HERALD_MAX_TEST_EVENTS_PER_HOUR (accounts/quotas.py). Replays leave them out.
"""

from django.db import transaction

from delivery.engine.accounts import quotas
from delivery.engine.intake import fanout
from delivery.engine.plumbing import clock, tracing
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import lifecycle
from delivery.models import Delivery, Message
from delivery.rules.vocabulary import TEST_EVENT_TYPE
from subscriptions.models import EventType, Subscription


def test_event(*, subscription: Subscription, now=None) -> Delivery:
    """A test event for `subscription` alone (`herald.test`, with the catalog's example of one of its event types
    when there is one), delivered and recorded like any other; a few per hour per subscription. Replays leave test
    events out."""
    now = now or clock.now()
    if subscription.status == Subscription.Status.PENDING_CONFIRMATION:
        raise ApplicationError("The endpoint has not confirmed this subscription yet; confirm it first.",
                               status_code=409)
    quotas.test_events(subscription, now)
    example = (EventType.objects.filter(owner_id=subscription.topic.owner_id, name__in=subscription.event_types or [])
               .exclude(example=None).values_list("name", "example").first())
    payload = {"test": True, "subscription": subscription.id, "sent_at": now.isoformat()}
    if example:
        payload.update(event_type=example[0], example=example[1])
    with tracing.publishing(subscription.topic.name, 1, {"herald.owner": subscription.topic.owner_id,
                                                         "herald.topic": subscription.topic_id,
                                                         "herald.test_event": True}):
        return _test_event(subscription, payload, now)


def _test_event(subscription: Subscription, payload: dict, now) -> Delivery:
    with transaction.atomic():
        message = Message.objects.create(
            topic=subscription.topic, tenant_id=subscription.tenant_id, event_type=TEST_EVENT_TYPE,
            subject=f"subscription:{subscription.id}", payload=payload, published_at=now, fanout_skipped={},
            trace_parent=tracing.current_traceparent())
        candidate = fanout.Candidate(subscription.id, subscription.endpoint_id, subscription.status,
                                     confirmed_before=subscription.confirmed_at is not None,
                                     tenant_id=subscription.tenant_id)
        created = Delivery.objects.bulk_create(fanout.build_deliveries(message, [candidate]))
        lifecycle.created(created)
    return created[0]

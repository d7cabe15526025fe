"""Archive and replay: a topic's messages are kept for its retention (`Topic.message_retention_days`, else
HERALD_MESSAGE_RETENTION_DAYS), and a replay delivers those published in [since, until) to one subscription again,
as new deliveries marked with the replay (the request says so in `herald-replay`).

A replay goes through the subscription's own filters (what it would have received) and, optionally, a filter of
its own; its deliveries follow the subscription's policy like any other (throttle, retries, dead letters), keep the
order of an ordered subscription's keys, and are held while the subscription is paused. It is written in one
transaction: all of its deliveries or none.
"""

from datetime import timedelta

from django.db import transaction

from delivery.conf import herald
from delivery.engine.accounts import quotas
from delivery.engine.intake import fanout
from delivery.engine.plumbing import clock
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import lifecycle
from delivery.models import Delivery, Message, Replay
from delivery.rules.filters import policy as filters
from delivery.rules.vocabulary import TEST_EVENT_TYPE
from subscriptions.models import Subscription

CHUNK = 1000


def retention_days(topic) -> int:
    return topic.message_retention_days or herald.MESSAGE_RETENTION_DAYS


def replay_create(*, subscription: Subscription, since, until=None, filter_policy=None,
                  filter_policy_scope: str = filters.ATTRIBUTES, event_types=None, requested_by=None,
                  now=None) -> Replay:
    """Deliver the topic's messages published in [since, until) to `subscription` again; returns the Replay."""
    now = now or clock.now()
    until = _checked_window(subscription, since, until, now,
                            filters.problems(policy=filter_policy, scope=filter_policy_scope, event_types=event_types))
    quotas.replay(subscription, now)
    window = Message.objects.filter(fanout.messages_for(subscription), topic_id=subscription.topic_id,
                                    published_at__gte=since, published_at__lt=until).exclude(
        event_type=TEST_EVENT_TYPE)
    limit = herald.MAX_REPLAY_MESSAGES
    if window[limit:limit + 1].exists():
        raise ApplicationError(f"More than {limit} messages were published in that window; narrow since/until "
                               f"(HERALD_MAX_REPLAY_MESSAGES).", field="until")
    own = (subscription.filter_policy, subscription.filter_policy_scope, subscription.event_types)
    extra = (filter_policy, filter_policy_scope, event_types)
    paused = subscription.status == Subscription.Status.PAUSED
    with transaction.atomic():
        replay = Replay.objects.create(subscription=subscription, since=since, until=until,
                                       filter_policy=filter_policy or None, filter_policy_scope=filter_policy_scope,
                                       event_types=event_types or [], requested_by=requested_by, requested_at=now)
        count = 0
        batch: list[Delivery] = []
        for message in window.order_by("published_at", "id").iterator(chunk_size=CHUNK):
            facts = fanout.Facts.of(message)
            if fanout.failing_filter(facts, *own) is not None or fanout.failing_filter(facts, *extra) is not None:
                continue
            keyed = message.ordering_key if subscription.ordered_delivery else None
            # Keyed ones all wait; their heads are released once this commits (under each key's lock).
            batch.append(lifecycle.new_delivery(
                message, subscription_id=subscription.id, endpoint_id=subscription.endpoint_id,
                owner_id=subscription.topic.owner_id, tenant_id=subscription.tenant_id, due=now, hold=paused,
                ordering_key=keyed, behind=bool(keyed), replay=replay))
            count += 1
            if len(batch) == CHUNK:
                lifecycle.created(Delivery.objects.bulk_create(batch))
                batch = []
        lifecycle.created(Delivery.objects.bulk_create(batch))
        Replay.objects.filter(id=replay.id).update(messages=count)
        replay.messages = count
    if subscription.ordered_delivery and count:
        lifecycle.release_heads(subscription.id, now=now)
    return replay


def _checked_window(subscription: Subscription, since, until, now, problems: dict):
    """The replay's end (until, at most now), once what it asks is checked: its own filters (on top of the
    subscription's: the same rules as a subscription's), its window, and a subscription that may be sent to."""
    if problems:
        raise ApplicationError.of_problems(problems)
    if until is not None and since >= until:
        raise ApplicationError("must be later than since", field="until")
    until = min(until or now, now)
    if since >= until:
        raise ApplicationError("must be earlier than until (and than now)", field="since")
    if subscription.status == Subscription.Status.PENDING_CONFIRMATION:
        raise ApplicationError("The subscription's endpoint has not confirmed it; nothing can be replayed to it.",
                               status_code=409)
    return until


def oldest_kept(topic, now=None):
    """The earliest publish time a replay of this topic can reach."""
    return (now or clock.now()) - timedelta(days=retention_days(topic))

"""Deleting what deliveries point at (a subscription, a topic, a tenant), all or nothing, never under a send.

A delete takes its rows with everything that points at them: a subscription its deliveries (pending, finished,
dead letters), their attempts and replays; a topic its subscriptions (with theirs) and its messages. Endpoints stay
(they are the owner's, or the tenant's, and other subscriptions may use them).

Every delete locks in one order, the same for each kind (`locked`): the parent row (topic or tenant), then the
endpoints, the subscriptions and the deliveries it touches, each by id, so no claim or recorded attempt adds a row
pointing at them before they go (a publish that read the subscription just before is written again without it:
publishing.write), and two deletes (or a delete and a health transition, which locks an
endpoint and then its held deliveries) never wait on each other in a circle. While any of the deliveries is in
flight (its worker is about to record the attempt, which needs its row) the answer is a 409 and nothing is deleted:
sends end within their deadline, and a paused subscription starts no new ones. One whose lease ran out (its worker
died) is not waited for.

    subscription_delete(subscription=subscription)   # 409 while any of its deliveries is being sent
    topic_delete(topic=topic)                         # the same, for any of its subscriptions'
"""

from django.db import transaction
from django.db.models import QuerySet

from delivery.engine.plumbing import clock
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import lifecycle
from delivery.models import Delivery
from subscriptions.models import Endpoint, Subscription, Topic


def locked(*, endpoints: QuerySet, subscriptions: QuerySet, deliveries: QuerySet, now) -> int:
    """Lock the rows a delete touches, in the order every delete takes them (endpoints, subscriptions,
    deliveries; each by id), inside the caller's transaction; how many of the deliveries are being sent (in flight
    under a live lease)."""
    for rows in (endpoints, subscriptions, deliveries):
        list(rows.order_by("id").select_for_update().values_list("id", flat=True))
    return (deliveries & lifecycle.in_flight()).exclude(lease_until__lt=now).count()


def refusal(sending: int, *, whose: str, pause: str) -> ApplicationError:
    """The 409 of a delete refused while `sending` deliveries are in flight."""
    deliveries = "1 delivery" if sending == 1 else f"{sending} deliveries"
    return ApplicationError(
        f"{whose} {deliveries} being sent right now (in flight); nothing was deleted. Try again when they are done "
        f"(within their send's deadline), or pause {pause} first so that no new send starts.", status_code=409)


def subscription_delete(*, subscription: Subscription, now=None) -> None:
    """The subscription with its deliveries (pending, finished, dead letters), their attempts and its replays;
    a 409, nothing deleted, while any of its deliveries is being sent."""
    now = now or clock.now()
    with transaction.atomic():
        Topic.objects.select_for_update().filter(id=subscription.topic_id).first()  # as a subscribe locks it
        mine = Subscription.objects.filter(id=subscription.id)
        sending = locked(endpoints=Endpoint.objects.filter(id__in=mine.values("endpoint_id")), subscriptions=mine,
                         deliveries=Delivery.objects.filter(subscription_id=subscription.id), now=now)
        if sending:
            raise refusal(sending, whose="This subscription has", pause="the subscription")
        mine.delete()


def topic_delete(*, topic: Topic, now=None) -> None:
    """The topic with its messages and its subscriptions (theirs and their tenants' alike, with their deliveries,
    attempts and replays); a 409, nothing deleted, while any of its deliveries is being sent."""
    now = now or clock.now()
    with transaction.atomic():
        Topic.objects.select_for_update().filter(id=topic.id).first()  # no subscribe meanwhile
        subscriptions = Subscription.objects.filter(topic_id=topic.id)
        sending = locked(endpoints=Endpoint.objects.filter(id__in=subscriptions.values("endpoint_id")),
                         subscriptions=subscriptions,
                         deliveries=Delivery.objects.filter(subscription_id__in=subscriptions.values("id")), now=now)
        if sending:
            raise refusal(sending, whose="This topic's subscriptions have", pause="its subscriptions")
        Topic.objects.filter(id=topic.id).delete()

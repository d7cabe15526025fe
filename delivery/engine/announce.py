"""Announcing outcomes after commit: the signals of delivery/signals.py and Herald's operational events. Every
writer of a finished delivery or an endpoint transition calls one of these inside its transaction; nothing is read
unless a receiver is connected or operational events are on."""

import logging

from django.db import transaction

from delivery import signals
from delivery.engine import operational, ordering
from delivery.models import Delivery
from subscriptions.models import Endpoint

log = logging.getLogger(__name__)


def _send(signal, **kwargs) -> None:
    for receiver, result in signal.send_robust(**kwargs):
        if isinstance(result, Exception):
            log.error("signal receiver %r failed: %s", receiver, result, exc_info=result)


def deliveries_finished(changes: dict[int, str], keyed=()) -> None:
    """What follows deliveries' end: in the caller's transaction, the next message of each ordering key among
    `keyed` (ids of finished deliveries with an ordering key) is released; after the caller's commit, the
    deliveries that `changes` ({id: new status}) finished are announced."""
    ended = [i for i in keyed if changes.get(i) in Delivery.TERMINAL]
    if ended:
        ordering.release_next(ended)
    succeeded = [i for i, status in changes.items() if status == Delivery.Status.SUCCEEDED]
    dead = [i for i, status in changes.items() if status == Delivery.Status.DEAD_LETTERED]
    with_events = bool(dead) and operational.enabled()
    wanted = (succeeded and signals.delivery_succeeded.has_listeners(Delivery)) or (
        dead and signals.delivery_dead_lettered.has_listeners(Delivery)) or with_events
    if not wanted:
        return

    def announce():
        rows = Delivery.objects.filter(id__in=succeeded + dead).select_related(
            "message__topic__owner", "subscription", "endpoint")
        for delivery in rows:  # as committed: a row that moved on since is announced as what it is now, or not
            if delivery.status == Delivery.Status.SUCCEEDED and delivery.id in succeeded:
                _send(signals.delivery_succeeded, sender=Delivery, delivery=delivery)
            elif delivery.status == Delivery.Status.DEAD_LETTERED and delivery.id in dead:
                _send(signals.delivery_dead_lettered, sender=Delivery, delivery=delivery,
                      reason=delivery.dead_letter_reason)
                if with_events:
                    operational.delivery_dead_lettered(delivery)

    transaction.on_commit(announce, robust=True)


def endpoint_changed(endpoint: Endpoint, from_state: str, to_state: str, reason: str) -> None:
    """After the caller's commit, announce an endpoint's new state."""
    with_events = operational.enabled()
    if not (with_events or signals.endpoint_state_changed.has_listeners(Endpoint)):
        return

    def announce():
        _send(signals.endpoint_state_changed, sender=Endpoint, endpoint=endpoint, from_state=from_state,
              to_state=to_state, reason=reason)
        if with_events:
            operational.endpoint_changed(endpoint, from_state, to_state, reason)

    transaction.on_commit(announce, robust=True)

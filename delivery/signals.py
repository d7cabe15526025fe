"""Signals for outcomes, sent after the state they report is committed (never for a change that rolled back):

    delivery_succeeded(sender=Delivery, delivery=…)
    delivery_dead_lettered(sender=Delivery, delivery=…, reason=…)
    endpoint_state_changed(sender=Endpoint, endpoint=…, from_state=…, to_state=…, reason=…)

Herald's operational events (delivery/operational.py) ride on the same announcements. Receivers run in the process
that made the change (a worker, the scheduler, a web process), after its commit; one
that raises is logged and does not affect the others or the delivery. With no receiver connected nothing is read.
"""

import logging

from django.db import transaction
from django.dispatch import Signal

from delivery import operational as operational_events

log = logging.getLogger(__name__)

delivery_succeeded = Signal()
delivery_dead_lettered = Signal()
endpoint_state_changed = Signal()


def _send(signal, **kwargs) -> None:
    for receiver, result in signal.send_robust(**kwargs):
        if isinstance(result, Exception):
            log.error("signal receiver %r failed: %s", receiver, result, exc_info=result)


def deliveries_finished(changes: dict[int, str]) -> None:
    """After the caller's commit, announce the deliveries that `changes` ({id: new status}) finished."""
    from delivery.models import Delivery

    succeeded = [i for i, status in changes.items() if status == Delivery.Status.SUCCEEDED]
    dead = [i for i, status in changes.items() if status == Delivery.Status.DEAD_LETTERED]
    operational = bool(dead) and operational_events.enabled()
    wanted = (succeeded and delivery_succeeded.has_listeners(Delivery)) or (
        dead and delivery_dead_lettered.has_listeners(Delivery)) or operational
    if not wanted:
        return

    def announce():
        rows = Delivery.objects.filter(id__in=succeeded + dead).select_related(
            "message__topic", "subscription", "endpoint")
        for delivery in rows:  # as committed: a row that moved on since is announced as what it is now, or not
            if delivery.status == Delivery.Status.SUCCEEDED and delivery.id in succeeded:
                _send(delivery_succeeded, sender=Delivery, delivery=delivery)
            elif delivery.status == Delivery.Status.DEAD_LETTERED and delivery.id in dead:
                _send(delivery_dead_lettered, sender=Delivery, delivery=delivery, reason=delivery.dead_letter_reason)
                if operational:
                    operational_events.delivery_dead_lettered(delivery)

    transaction.on_commit(announce, robust=True)


def endpoint_changed(endpoint, from_state: str, to_state: str, reason: str) -> None:
    """After the caller's commit, announce an endpoint's new state."""
    from subscriptions.models import Endpoint

    operational = operational_events.enabled()
    if not (operational or endpoint_state_changed.has_listeners(Endpoint)):
        return

    def announce():
        _send(endpoint_state_changed, sender=Endpoint, endpoint=endpoint, from_state=from_state, to_state=to_state,
              reason=reason)
        if operational:
            operational_events.endpoint_changed(endpoint, from_state, to_state, reason)

    transaction.on_commit(announce, robust=True)

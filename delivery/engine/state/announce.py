"""Announcing outcomes after commit: the signals of delivery/signals.py. The lifecycle calls these inside the
transaction that made the change; receivers run once it commits (never for a change that rolled back), and
nothing is read unless a receiver is connected. Herald's own operational events are one such receiver
(`operational.py`, connected when the app is ready). Log lines that name a tenant ask `tenant_name`."""

import logging

from django.db import DatabaseError, transaction

from delivery import signals
from delivery.engine.plumbing.database import after_commit
from delivery.models import Delivery
from delivery.rules.vocabulary import DeliveryStatus
from subscriptions.models import Endpoint, Tenant

log = logging.getLogger(__name__)


def _send(signal, **kwargs) -> None:
    for receiver, result in signal.send_robust(**kwargs):
        if isinstance(result, Exception):
            log.error("signal receiver %r failed: %s", receiver, result, exc_info=result)


def deliveries_finished(changes: dict[int, str]) -> None:
    """After the caller's commit, announce the deliveries that `changes` ({id: new status}) finished."""
    succeeded = [i for i, status in changes.items() if status == DeliveryStatus.SUCCEEDED]
    dead = [i for i, status in changes.items() if status == DeliveryStatus.DEAD_LETTERED]
    wanted = (succeeded and signals.delivery_succeeded.has_listeners(Delivery)) or (
        dead and signals.delivery_dead_lettered.has_listeners(Delivery))
    if not wanted:
        return

    def announce():
        rows = Delivery.objects.filter(id__in=succeeded + dead).select_related(
            "message__topic__owner", "subscription", "endpoint")
        for delivery in rows:  # as committed: a row that moved on since is announced as what it is now, or not
            if delivery.status == DeliveryStatus.SUCCEEDED and delivery.id in succeeded:
                _send(signals.delivery_succeeded, sender=Delivery, delivery=delivery)
            elif delivery.status == DeliveryStatus.DEAD_LETTERED and delivery.id in dead:
                _send(signals.delivery_dead_lettered, sender=Delivery, delivery=delivery,
                      reason=delivery.dead_letter_reason)

    after_commit(announce)


def endpoint_changed(endpoint: Endpoint, from_state: str, to_state: str, reason: str) -> None:
    """After the caller's commit, announce an endpoint's new state."""
    if not signals.endpoint_state_changed.has_listeners(Endpoint):
        return
    after_commit(_send, signals.endpoint_state_changed, sender=Endpoint, endpoint=endpoint, from_state=from_state,
                 to_state=to_state, reason=reason)


_tenant_ids: dict[int, str] = {}  # tenant id → external id (which never changes after registering)


def tenant_name(tenant_id: int | None) -> str | None:
    """A tenant's external id for a log line, read once per process (it never changes after registering); None:
    the owner's own. A database error names it by id: a log line never fails what it reports on."""
    if tenant_id is None:
        return None
    found = _tenant_ids.get(tenant_id)
    if found is None:
        try:
            with transaction.atomic():  # a savepoint, should a caller's transaction be open: a failure stays here
                found = (Tenant.objects.filter(id=tenant_id).values_list("external_id", flat=True).first()
                         or "(deleted)")
        except DatabaseError:  # a log line never fails what it reports on; the next one asks again
            return f"(tenant {tenant_id})"
        if len(_tenant_ids) > 100_000:
            _tenant_ids.clear()
        _tenant_ids[tenant_id] = found
    return found

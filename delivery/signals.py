"""Signals for outcomes, sent after the state they report is committed (never for a change that rolled back):

    delivery_succeeded(sender=Delivery, delivery=…)
    delivery_dead_lettered(sender=Delivery, delivery=…, reason=…)
    endpoint_state_changed(sender=Endpoint, endpoint=…, from_state=…, to_state=…, reason=…)

Receivers run in the process that made the change (a worker, the scheduler, a web process), after its commit; one
that raises is logged and does not affect the others or the delivery. With no receiver connected nothing is read.
They are sent by delivery/engine/state/announce.py.
"""

from django.dispatch import Signal

delivery_succeeded = Signal()
delivery_dead_lettered = Signal()
endpoint_state_changed = Signal()

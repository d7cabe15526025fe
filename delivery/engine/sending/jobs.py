"""RQ jobs. They take ids or a queue name, re-read state, and stay thin."""

from delivery.engine.sending import attempts
from delivery.engine.sending import pump as pumping
from delivery.rules.vocabulary import AttemptQueue


def deliver(delivery_ids: list[int], queue_name: str = AttemptQueue.DELIVERIES) -> int:
    """Attempt the given deliveries; ids that are not pending and due are ignored, so duplicates are harmless."""
    return attempts.process(delivery_ids, queue_name)


def pump(queue_name: str = AttemptQueue.DELIVERIES) -> int:
    """Deliver whatever is due until nothing is due and nothing is in flight."""
    return pumping.drain(queue_name)

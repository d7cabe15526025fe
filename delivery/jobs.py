"""RQ jobs. They take ids, re-read state, and stay thin."""

from . import attempts


def deliver(delivery_ids: list[int], queue_name: str = "deliveries") -> int:
    """Attempt the given deliveries; ids that are not pending and due are ignored, so duplicates are harmless."""
    return attempts.process(delivery_ids, queue_name)


def send_confirmation(subscription_id: int, token: str) -> str:
    from .confirmation import send_confirmation_request

    return send_confirmation_request(subscription_id, token)


def fan_out(message_id: str) -> int:
    from .fanout import fan_out as create_deliveries

    return create_deliveries(message_id)

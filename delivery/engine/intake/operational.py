"""Operational events: Herald publishes its own events to a topic of the owner's choosing, so operators subscribe
to them like to any topic (an on-call webhook, a chat bridge) instead of polling the dashboard.

    HERALD_OPERATIONAL_EVENTS_TOPIC = "herald-ops"     # the topic's name
    HERALD_OPERATIONAL_EVENTS_OWNER = "ops"            # the username owning it (created on first use)

Events: `herald.endpoint.disabled`, `herald.endpoint.frozen`, `herald.endpoint.recovered` (active again) and
`herald.delivery.dead_lettered`, each naming the tenant whose endpoint it is (or null for the owner's own), each
published after the change is committed: they are receivers of
delivery/signals.py like any project's own (`connect`, called when the app is ready). Dead letters of the
operational topic itself are not announced (an unreachable operator endpoint would otherwise feed itself). No
secret is ever in them.
"""

import logging

from django.contrib.auth import get_user_model

from delivery import signals
from delivery.conf import herald
from delivery.engine.accounts.subscribing import topic_create
from delivery.engine.intake.publishing import message_publish
from subscriptions.models import Topic

log = logging.getLogger(__name__)
STATE_EVENTS = {"disabled": "herald.endpoint.disabled", "frozen": "herald.endpoint.frozen",
                "active": "herald.endpoint.recovered"}


def enabled() -> bool:
    return bool(herald.OPERATIONAL_EVENTS_TOPIC and herald.OPERATIONAL_EVENTS_OWNER)


def _topic() -> Topic:
    User = get_user_model()
    owner = User.objects.get(**{User.USERNAME_FIELD: herald.OPERATIONAL_EVENTS_OWNER})
    return (Topic.objects.filter(owner=owner, name=herald.OPERATIONAL_EVENTS_TOPIC).first()
            or topic_create(owner=owner, name=herald.OPERATIONAL_EVENTS_TOPIC)[0])


def _publish(event_type: str, subject: str, payload: dict, attributes: dict) -> None:
    try:
        message_publish(topic=_topic(), payload=payload, event_type=event_type, subject=subject,
                        attributes={key: str(value) for key, value in attributes.items()})
    except Exception:  # an operational event must never break the delivery that caused it
        log.exception("operational event %s could not be published", event_type)


def connect() -> None:
    """Make the operational events receivers of Herald's signals (they publish only while enabled)."""
    signals.endpoint_state_changed.connect(on_endpoint_state_changed, dispatch_uid="herald.operational.endpoint")
    signals.delivery_dead_lettered.connect(on_delivery_dead_lettered, dispatch_uid="herald.operational.dead")


def on_endpoint_state_changed(sender, endpoint, from_state: str, to_state: str, reason: str, **kwargs) -> None:
    if enabled():
        endpoint_changed(endpoint, from_state, to_state, reason)


def on_delivery_dead_lettered(sender, delivery, **kwargs) -> None:
    if enabled():
        delivery_dead_lettered(delivery)


def endpoint_changed(endpoint, from_state: str, to_state: str, reason: str) -> None:
    event_type = STATE_EVENTS.get(to_state)
    if event_type is None or from_state == to_state:
        return
    _publish(event_type, f"endpoint:{endpoint.id}", {
        "endpoint": {"id": endpoint.id, "url": endpoint.url, "owner": str(endpoint.owner)},
        "tenant": tenant_named(endpoint.tenant),
        "from_state": from_state, "to_state": to_state, "reason": reason,
        "consecutive_failures": endpoint.consecutive_failures,
        "at": endpoint.state_changed_at.isoformat() if endpoint.state_changed_at else None,
    }, {"endpoint_id": endpoint.id, "state": to_state,
        **({"tenant": endpoint.tenant.external_id} if endpoint.tenant_id else {})})


def tenant_named(tenant) -> dict | None:
    """Whose endpoint it is, when it is a tenant's: the owner's own id for the customer and its name."""
    return {"external_id": tenant.external_id, "name": tenant.name} if tenant is not None else None


def delivery_dead_lettered(delivery) -> None:
    topic = delivery.message.topic
    if topic.name == herald.OPERATIONAL_EVENTS_TOPIC and str(topic.owner) == herald.OPERATIONAL_EVENTS_OWNER:
        return
    last = delivery.attempts.order_by("-number").values("response_status", "error_class", "error_detail").first()
    _publish("herald.delivery.dead_lettered", f"delivery:{delivery.id}", {
        "delivery": delivery.id, "message": str(delivery.message_id), "topic": topic.name,
        "subscription": delivery.subscription_id, "endpoint": delivery.endpoint.url,
        "tenant": tenant_named(delivery.endpoint.tenant),
        "reason": delivery.dead_letter_reason, "attempts": delivery.attempt_count, "last_error": last,
        "at": delivery.finished_at.isoformat() if delivery.finished_at else None,
    }, {"reason": delivery.dead_letter_reason, "topic": topic.name})

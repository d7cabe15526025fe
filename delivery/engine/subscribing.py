"""Topic, subscription and endpoint services: validate, check current state, change it."""

from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from delivery.engine.confirmation import confirmation_request
from delivery.engine.errors import ApplicationError
from delivery.models import Delivery
from delivery.rules import policy as delivery_policy
from delivery.transport import ssrf
from subscriptions.models import Endpoint, Subscription, Topic, generate_secret
from subscriptions.urlnorm import DEFAULT_PORTS, InvalidURL, normalize_url


def validate_policy(document) -> None:
    """Raises PolicyError (→ 400 naming every bad field) unless `document` is empty or valid."""
    if document in (None, {}):
        return
    delivery_policy.parse(document)


def topic_create(*, owner, name: str, description: str = "", delivery_policy=None) -> Topic:
    validate_policy(delivery_policy)
    try:
        with transaction.atomic():
            return Topic.objects.create(owner=owner, name=name, description=description,
                                        delivery_policy=delivery_policy or None)
    except IntegrityError:
        raise ApplicationError("You already have a topic with this name.", field="name") from None


def topic_update(*, topic: Topic, **changes) -> Topic:
    if "delivery_policy" in changes:
        validate_policy(changes["delivery_policy"])
        changes["delivery_policy"] = changes["delivery_policy"] or None
    for key, value in changes.items():
        setattr(topic, key, value)
    try:
        with transaction.atomic():
            topic.save()
    except IntegrityError:
        raise ApplicationError("You already have a topic with this name.", field="name") from None
    return topic


def endpoint_for(*, owner, url: str) -> Endpoint:
    try:
        normalized = normalize_url(url)
    except InvalidURL as exc:
        raise ApplicationError(str(exc), field="endpoint") from None
    parts = urlsplit(normalized)
    allowed = ssrf.parse_networks(tuple(settings.HERALD_ALLOWED_NETWORKS))
    refusal = ssrf.subscribe_time_refusal(parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme], allowed)
    if refusal:
        raise ApplicationError(refusal, field="endpoint")
    endpoint, _ = Endpoint.objects.get_or_create(owner=owner, url=normalized)
    return endpoint


def subscription_create(
    *, topic: Topic, endpoint: str, delivery_policy=None, filter_policy=None, raw_message_delivery=False
) -> tuple[Subscription, str]:
    """Returns the subscription and its signing secret (shown to the caller this once)."""
    validate_policy(delivery_policy)
    with transaction.atomic():
        health = endpoint_for(owner=topic.owner, url=endpoint)
        confirmed = not settings.HERALD_REQUIRE_CONFIRMATION
        subscription = Subscription.objects.create(
            topic=topic,
            endpoint=health,
            delivery_policy=delivery_policy or None,
            filter_policy=filter_policy or None,
            raw_message_delivery=raw_message_delivery,
            secret=generate_secret(),
            status=Subscription.Status.CONFIRMED if confirmed else Subscription.Status.PENDING_CONFIRMATION,
        )
        if not confirmed:
            confirmation_request(subscription=subscription)
    return subscription, subscription.secret


def subscription_update(*, subscription: Subscription, **changes) -> Subscription:
    if "delivery_policy" in changes:
        validate_policy(changes["delivery_policy"])
        changes["delivery_policy"] = changes["delivery_policy"] or None
    if "endpoint" in changes:
        changes["endpoint"] = endpoint_for(owner=subscription.topic.owner, url=changes["endpoint"])
    for key, value in changes.items():
        setattr(subscription, key, value)
    with transaction.atomic():
        subscription.save()
        if "endpoint" in changes:
            # Retries and held deliveries follow the subscription to its new URL (and its health record).
            Delivery.objects.filter(subscription=subscription, status=Delivery.Status.PENDING).update(
                endpoint=changes["endpoint"])
    return subscription


ROTATION_GRACE = timedelta(hours=24)


def subscription_rotate_secret(*, subscription: Subscription) -> Subscription:
    """A new secret; the old one keeps signing beside it for 24 hours. A rotation during a grace period ends the
    older secret at once (only two are ever in use)."""
    now = timezone.now()
    with transaction.atomic():
        locked = Subscription.objects.select_for_update().get(id=subscription.id)
        locked.previous_secret, locked.previous_secret_expires_at = locked.secret, now + ROTATION_GRACE
        locked.secret = generate_secret()
        locked.save(update_fields=["secret", "previous_secret", "previous_secret_expires_at", "updated_at"])
    return locked

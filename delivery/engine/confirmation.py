"""Subscription confirmation: no deliveries to URLs that did not opt in.

Herald sends a `herald.subscription.confirmation` CloudEvent with a token and a confirm URL. The subscription is
confirmed by a 2xx answer carrying {"validationResponse": token} (Event Grid's handshake), by a GET of the confirm URL
(SNS's SubscribeURL), or by POSTing the token to the API. Tokens expire after 3 days; only their hash is stored.
"""

import hashlib
import json
import logging
import uuid
from datetime import timedelta
from urllib.parse import urlencode

import django_rq
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac

from delivery.conf import VERSION, herald
from delivery.engine import lifecycle, quotas
from delivery.engine.errors import ApplicationError
from delivery.rules import wire
from delivery.rules.vocabulary import AttemptQueue
from delivery.transport import sender
from subscriptions.models import Subscription

log = logging.getLogger(__name__)
TOKEN_LIFETIME = timedelta(days=3)
EVENT_TYPE = "herald.subscription.confirmation"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def confirm_url(token: str) -> str:
    path = reverse("herald:subscription-confirm-by-link")
    return f"{herald.PUBLIC_URL.rstrip('/')}{path}?{urlencode({'token': token})}"


def current_token(subscription: Subscription) -> str:
    """The subscription's confirmation token, derived from its state with the project's SECRET_KEY (as Django
    derives password-reset tokens): the job that sends it gets only the subscription's id, so the token never
    appears in Redis, in a job's arguments or in a worker's log, and a database dump alone does not reveal it.
    Issuing a new token (a new expiry) invalidates the previous one."""
    return salted_hmac("herald.subscription.confirmation",
                       f"{subscription.id}:{subscription.confirmation_expires_at.isoformat()}",
                       algorithm="sha256").hexdigest()


def confirmation_request(*, subscription: Subscription, now=None) -> None:
    """Issue a fresh token and send the confirmation event after the transaction commits."""
    subscription.confirmation_expires_at = (now or timezone.now()) + TOKEN_LIFETIME
    subscription.confirmation_token_hash = token_hash(current_token(subscription))
    subscription.save(update_fields=["confirmation_token_hash", "confirmation_expires_at", "updated_at"])
    queue = django_rq.get_queue(AttemptQueue.DELIVERIES)
    transaction.on_commit(lambda: queue.enqueue(send_confirmation_request, subscription.id, result_ttl=0))


def confirmation_resend(*, subscription: Subscription, now=None) -> None:
    """By hand (the API, the admin): a new token to a subscription awaiting confirmation, within the quotas."""
    if subscription.status != Subscription.Status.PENDING_CONFIRMATION:
        raise ApplicationError("The subscription is already confirmed.", status_code=409)
    now = now or timezone.now()
    quotas.resend(subscription, now)
    confirmation_request(subscription=subscription, now=now)


def subscription_confirm(*, token: str, subscription: Subscription | None = None, now=None) -> Subscription:
    now = now or timezone.now()
    candidates = Subscription.objects.filter(confirmation_token_hash=token_hash(token or ""))
    if subscription is not None:
        candidates = candidates.filter(id=subscription.id)
    found = candidates.first() if token else None
    if found is None:
        raise ApplicationError("This confirmation token is not valid.", field="token", status_code=400)
    if found.status == Subscription.Status.CONFIRMED:
        return found
    if found.confirmation_expires_at is None or found.confirmation_expires_at < now:
        raise ApplicationError("This confirmation token has expired; ask for a new one.", field="token")
    with transaction.atomic():
        found.status = Subscription.Status.CONFIRMED
        found.confirmed_at = now
        found.confirmation_token_hash = ""
        found.save(update_fields=["status", "confirmed_at", "confirmation_token_hash", "updated_at"])
        # What was held while a changed endpoint confirmed goes out now (endpoint health and throttles still apply).
        lifecycle.release(now=found.confirmed_at, subscription=found)
    return found


def send_confirmation_request(subscription_id: int, now=None) -> str:
    """The RQ job: send the confirmation event; a 2xx answer with the token confirms at once."""
    now = now or timezone.now()
    subscription = Subscription.objects.select_related("topic", "endpoint").filter(id=subscription_id).first()
    if subscription is None or subscription.status != Subscription.Status.PENDING_CONFIRMATION:
        return "not pending"
    if subscription.confirmation_expires_at is None or subscription.confirmation_expires_at < now:
        return "token expired"
    token = current_token(subscription)
    envelope = wire.Envelope(
        message_id=str(uuid.uuid4()), topic_name=subscription.topic.name, event_type=EVENT_TYPE, subject="",
        published_at=now, payload={"subscription_id": subscription.id, "token": token,
                                              "confirm_url": confirm_url(token)},
        payload_is_text=False, subscription_id=subscription.id, url=subscription.endpoint.url, raw=False,
        secrets=subscription.signing_secrets(now), user_agent=f"Herald/{VERSION}",
        client_certificate=subscription.client_credentials(),
    )
    # No OAuth2 bearer: the handshake is what asks for consent, so nothing goes to the token URL before it is
    # answered (an endpoint that insists on a bearer confirms through the link or the API instead).
    request = wire.build_request(envelope, attempt_number=1, now=now)
    result = sender.send(request, timeout=30)
    if not result.ok:
        log.info("confirmation for subscription %s: endpoint answered %s %s", subscription_id, result.status,
                 result.error_class)
        return "no answer"
    try:
        answer = json.loads(result.body_excerpt)
    except ValueError:
        return "no validation response"
    if isinstance(answer, dict) and answer.get("validationResponse") == token:
        subscription_confirm(token=token, subscription=subscription)
        return "confirmed"
    return "no validation response"

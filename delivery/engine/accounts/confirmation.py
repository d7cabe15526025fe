"""Subscription confirmation: no deliveries to URLs that did not opt in.

Herald sends a `herald.subscription.confirmation` CloudEvent with a token and a confirm URL. The subscription is
confirmed by a 2xx answer carrying {"validationResponse": token} (Event Grid's handshake), by a GET of the confirm URL
(SNS's SubscribeURL), or by POSTing the token to the API. Tokens expire after 3 days; only their hash is stored.

The handshake is sent by the pumps, like a delivery: a subscription whose `confirmation_send_at` has come is claimed
under a lease and its request goes through the transport in its endpoint's room, with the same address guard and
deadline, so a confirmation target that never answers holds one send slot of its own endpoint, never a worker.
"""

import hashlib
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

from django.db import connection, transaction
from django.urls import reverse
from django.utils.crypto import salted_hmac

from delivery.conf import VERSION, herald, public_url
from delivery.engine.accounts import quotas
from delivery.engine.plumbing import clock, database, queues
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import lifecycle
from delivery.rules import answers, storable, wire
from delivery.rules.send_shares import share_of
from delivery.transport import sender
from subscriptions.models import Subscription

log = logging.getLogger(__name__)
TOKEN_LIFETIME = timedelta(days=3)
EVENT_TYPE = "herald.subscription.confirmation"
HANDSHAKE_TIMEOUT_SECONDS = 30
RETRY_UNSENT_SECONDS = 1.0


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def confirm_url(token: str) -> str:
    path = reverse("herald:subscription-confirm-by-link")
    return f"{public_url(path)}?{urlencode({'token': token})}"


def current_token(subscription: Subscription) -> str:
    """The subscription's confirmation token, derived from its state with the project's SECRET_KEY (as Django
    derives password-reset tokens): the job that sends it gets only the subscription's id, so the token never
    appears in Redis, in a job's arguments or in a worker's log, and a database dump alone does not reveal it.
    Issuing a new token (a new expiry) invalidates the previous one."""
    return salted_hmac("herald.subscription.confirmation",
                       f"{subscription.id}:{subscription.confirmation_expires_at.isoformat()}",
                       algorithm="sha256").hexdigest()


def confirmation_request(*, subscription: Subscription, now=None) -> None:
    """Issue a fresh token; the handshake goes out with the next pump once the transaction commits. Every
    handshake (a new subscription, a changed endpoint or token URL, a resend) comes through here, within its owner's
    and its tenant's hourly allowance (quotas.handshake): past it a 429, and the caller's transaction writes
    nothing."""
    now = now or clock.now()
    quotas.handshake(subscription, now)
    subscription.confirmation_expires_at = now + TOKEN_LIFETIME
    subscription.confirmation_token_hash = token_hash(current_token(subscription))
    subscription.confirmation_send_at = now
    # What an earlier request was answered (another URL's, perhaps) is not this one's
    subscription.handshake_at, subscription.handshake_status = None, None
    subscription.handshake_answer = subscription.handshake_problem = ""
    subscription.save(update_fields=["confirmation_token_hash", "confirmation_expires_at", "confirmation_send_at",
                                     "handshake_at", "handshake_status", "handshake_answer", "handshake_problem",
                                     "updated_at"])
    queues.pump_after_commit()


def confirmation_resend(*, subscription: Subscription, now=None) -> None:
    """By hand (the API, the admin): a new token to a subscription awaiting confirmation, within the quotas."""
    if subscription.status != Subscription.Status.PENDING_CONFIRMATION:
        raise ApplicationError("The subscription is already confirmed.", status_code=409)
    now = now or clock.now()
    quotas.resend(subscription, now)
    try:
        confirmation_request(subscription=subscription, now=now)
    except ApplicationError:  # the handshakes' allowance is spent: this resend counts for nothing either
        quotas.resend_given_back(subscription, now)
        raise


def subscription_confirm(*, token: str, subscription: Subscription | None = None, now=None) -> Subscription:
    now = now or clock.now()
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


def due(now):
    """Subscriptions whose handshake is to be sent (asked for, or its sender's lease ran out)."""
    return Subscription.objects.filter(confirmation_send_at__lte=now)


@dataclass(frozen=True)
class Handshake:
    """One handshake on its way: which subscription, with which token, under which lease."""

    subscription_id: int
    token: str
    lease: object


def claim(now, limit: int) -> list[Subscription]:
    """Take up to `limit` due handshakes (SKIP LOCKED: another pump's are left to it), each under a lease that
    covers the wait for a send slot and the request: if the pump dies, the handshake goes again after it. With
    nothing due, one index probe."""
    lease = now + timedelta(seconds=herald.SEND_START_WINDOW_SECONDS + HANDSHAKE_TIMEOUT_SECONDS
                            + herald.LEASE_MARGIN_SECONDS)
    if connection.vendor == "postgresql":  # one round trip
        table = Subscription._meta.db_table
        # (prepared: a pump asks this after every announcement of new work, nearly always to find nothing)
        with database.bound_cursor() as cursor:
            cursor.execute(
                f"""UPDATE {table} SET confirmation_send_at = %s
                    WHERE id IN (SELECT id FROM {table} WHERE confirmation_send_at <= %s
                                 ORDER BY confirmation_send_at LIMIT %s FOR UPDATE SKIP LOCKED)
                    RETURNING id""", [lease, now, limit])
            ids = [row[0] for row in cursor.fetchall()]
    else:  # SQLite (local runs): writers are serialized
        with transaction.atomic():
            ids = list(due(now).order_by("confirmation_send_at").values_list("id", flat=True)[:limit])
            Subscription.objects.filter(id__in=ids).update(confirmation_send_at=lease)
    if not ids:
        return []
    return list(Subscription.objects.select_related("topic", "endpoint").filter(id__in=ids,
                                                                                confirmation_send_at=lease))


def start_handshakes(now, limit: int, *, transport, start_by=None) -> dict:
    """Claim due handshakes and hand them to the transport, in their endpoint's room like its deliveries, so a
    target that never answers holds only its own slot, never a worker: {future: Handshake}. What is no longer
    to be sent (confirmed meanwhile, token expired) is cleared without a request."""
    started = {}
    for subscription in claim(now, limit):
        pending = subscription.status == Subscription.Status.PENDING_CONFIRMATION
        if not pending or subscription.confirmation_expires_at is None or subscription.confirmation_expires_at < now:
            _done(subscription.id, subscription.confirmation_send_at)
            continue
        token = current_token(subscription)
        future = transport.submit(handshake(subscription, token, now), timeout=HANDSHAKE_TIMEOUT_SECONDS,
                                  key=subscription.endpoint_id, start_by=start_by,
                                  share=share_of(subscription.topic.owner_id, subscription.tenant_id))
        started[future] = Handshake(subscription.id, token, subscription.confirmation_send_at)
    return started


def handshake(subscription: Subscription, token: str, now) -> wire.OutgoingRequest:
    """The `herald.subscription.confirmation` event, signed like a delivery. No OAuth2 bearer: the handshake is
    what asks for consent, so nothing goes to the token URL before it is answered (an endpoint that insists on a
    bearer confirms through the link or the API instead)."""
    envelope = wire.Envelope(
        message_id=str(uuid.uuid4()), topic_name=subscription.topic.name, event_type=EVENT_TYPE, subject="",
        published_at=now, payload={"subscription_id": subscription.id, "token": token,
                                   "confirm_url": confirm_url(token)},
        payload_is_text=False, subscription_id=subscription.id, url=subscription.endpoint.url, raw=False,
        secrets=subscription.signing_secrets(now), user_agent=f"Herald/{VERSION}",
        client_certificate=subscription.client_credentials(),
    )
    return wire.build_request(envelope, attempt_number=1, now=now)


ANSWER_CHARS = 500  # of a handshake's answer kept on the subscription (an attempt keeps 4 KiB of a delivery's)
HOW_TO_CONFIRM = ('answer the confirmation request with a 2xx whose JSON body is {"validationResponse": "<the token '
                  'it carries>"}, or GET its confirm_url')


def handshake_problem(result, token: str) -> str:
    """Why an answered handshake did not confirm, in words an owner can act on ("" when it confirms)."""
    if result.status is None:
        return f"no answer: {result.error_class}" + (f" ({result.error_detail[:200]})" if result.error_detail else "")
    if not result.ok:
        return f"the endpoint answered HTTP {result.status}; {HOW_TO_CONFIRM}"
    answer, _ = answers.json_value(result.body_excerpt)
    if not isinstance(answer, dict) or "validationResponse" not in answer:
        return f"the endpoint answered HTTP {result.status} without validationResponse; {HOW_TO_CONFIRM}"
    if answer["validationResponse"] != token:
        return (f"the endpoint answered HTTP {result.status} with a validationResponse that is not this request's "
                f"token (an earlier request's?); echo the token of the latest request, or GET its confirm_url")
    return ""


def record_handshake(handshake: Handshake, result, now) -> str:
    """Record what the endpoint answered: a 2xx echoing the token confirms at once; anything else leaves the
    subscription pending (confirmed later by the link or the API, or asked again), and what it answered and why
    it did not confirm are kept on the subscription (shown by the API, the admin, the portal and the fan-out) and
    logged. A handshake its endpoint's slots never let start goes again shortly."""
    if result is None:
        Subscription.objects.filter(id=handshake.subscription_id, confirmation_send_at=handshake.lease).update(
            confirmation_send_at=now + timedelta(seconds=RETRY_UNSENT_SECONDS))
        return "not started"
    _done(handshake.subscription_id, handshake.lease)
    problem = handshake_problem(result, handshake.token)
    # The answer, without the token it may echo (only the token's hash is kept). Kept only while this request's
    # token is the current one (before confirming, which retires it): a slow answer to an older request is not news.
    answer = storable.clean_text(result.body_excerpt.replace(handshake.token, "[token]"), ANSWER_CHARS)
    Subscription.objects.filter(id=handshake.subscription_id, confirmation_token_hash=token_hash(handshake.token)
                                ).update(handshake_at=now, handshake_status=result.status, handshake_answer=answer,
                                         handshake_problem=problem[:500])
    outcome = "confirmed" if not problem else "no answer" if not result.ok else "no validation response"
    if not problem:
        try:
            subscription_confirm(token=handshake.token, now=now)
        except ApplicationError:  # replaced meanwhile by a newer request, or expired: its record was not kept
            return "token replaced"
    else:
        log.warning("confirmation of subscription %s did not confirm: %s", handshake.subscription_id, problem)
    return outcome


def _done(subscription_id: int, lease) -> None:
    Subscription.objects.filter(id=subscription_id, confirmation_send_at=lease).update(confirmation_send_at=None)


def send_confirmation_request(subscription_id: int, now=None, *, transport=None) -> str:
    """Send one subscription's due handshake now and wait for its answer (tools and tests; pumps send them
    without waiting). Returns what happened."""
    now = now or clock.now()
    subscription = Subscription.objects.filter(id=subscription_id).first()
    if subscription is None or subscription.status != Subscription.Status.PENDING_CONFIRMATION:
        return "not pending"
    if subscription.confirmation_expires_at is None or subscription.confirmation_expires_at < now:
        return "token expired"
    Subscription.objects.filter(id=subscription_id).update(confirmation_send_at=now)
    started = start_handshakes(now, 1, transport=transport or sender.transport())
    for future, sent in started.items():
        return record_handshake(sent, future.result(), clock.now())
    return "not started"

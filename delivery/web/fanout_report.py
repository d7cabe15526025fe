"""Why a subscription did or did not get a message: the fan-out decision recorded at publish time, joined with the
delivery where one exists (its state, next attempt and last error). Read by the message's API page and its admin
page.

The topic's current subscriptions are the rows, every one of them: one created after the publish says so; one of
a tenant the message was not published for is `not_addressed` (and whom it was for); one deleted since is gone with
its deliveries."""

from django.db.models import Exists, OuterRef, Subquery

from delivery.engine.intake import fanout
from delivery.engine.state import lifecycle
from delivery.models import Attempt, Delivery, Message
from delivery.rules.filters.policy import body_of, explain
from delivery.rules.vocabulary import DeliveryStatus, FanoutOutcome
from subscriptions.models import Subscription

OUTCOMES = [outcome.value for outcome in FanoutOutcome]
REASON_CHARS = 1000


def _skipped_index(message: Message) -> dict[int, tuple[str, str | None]]:
    """subscription id → (outcome, failing attribute) from the recorded decision."""
    recorded = message.fanout_skipped or {}
    index = {sid: (FanoutOutcome.NOT_CONFIRMED, None) for sid in recorded.get(FanoutOutcome.NOT_CONFIRMED, [])}
    for key, ids in (recorded.get(FanoutOutcome.FILTERED_OUT) or {}).items():
        index.update({sid: (FanoutOutcome.FILTERED_OUT, key) for sid in ids})
    for held in (FanoutOutcome.PAUSED, FanoutOutcome.AWAITING_CONFIRMATION):
        index.update({sid: (held, None) for sid in recorded.get(held, [])})
    return index


def delivery_state(delivery: Delivery, last: Attempt | None) -> dict:
    error = None
    if last is not None and last.outcome != Attempt.Outcome.SUCCESS:
        error = {"attempt": last.number, "at": last.started_at, "status": last.response_status,
                 "error_class": last.error_class, "detail": last.error_detail}
    return {"id": delivery.id, "status": delivery.status, "attempt_count": delivery.attempt_count,
            "next_attempt_at": delivery.next_attempt_at, "delivered_at": delivery.delivered_at,
            "dead_letter_reason": delivery.dead_letter_reason, "last_error": error}


def error_words(error: dict | None) -> str:
    if error is None:
        return ""
    what = f"HTTP {error['status']}" if error["status"] else error["error_class"]
    return f"; last error: {what}" + (f" ({error['detail'][:120]})" if error["detail"] else "")


def where_it_stands(delivery: Delivery) -> str:
    """A delivery's state in words, with its last error (the dashboard's reason column; one query for the last
    attempt)."""
    last = delivery.attempts.order_by("-number").first()
    error = delivery_state(delivery, last)["last_error"]
    words = _delivery_reason(delivery, delivery.endpoint.state, delivery.subscription.status, error)
    if delivery.endpoint.state != "active" and delivery.endpoint.state_reason:
        words += f"; endpoint {delivery.endpoint.state}: {delivery.endpoint.state_reason}"
    return words


def _delivery_reason(delivery: Delivery, endpoint_state: str, subscription_status: str, error: dict | None) -> str:
    status = delivery.status
    if status == DeliveryStatus.SUCCEEDED:
        return f"delivered after {delivery.attempt_count} attempt(s)"
    if status == DeliveryStatus.DEAD_LETTERED:
        return (f"dead-lettered ({delivery.dead_letter_reason}) after {delivery.attempt_count} attempt(s)"
                + error_words(error))
    if status == DeliveryStatus.DROPPED:
        return "dropped"
    if status == DeliveryStatus.CANCELLED:
        return "cancelled by the subscription's transformation: nothing was sent"
    if status == DeliveryStatus.IN_FLIGHT:
        return "being sent now"
    if lifecycle.is_waiting(delivery):
        return (f"waiting for the earlier messages of ordering key {delivery.ordering_key!r} to be delivered or "
                f"dead-lettered (ordered delivery)")
    if lifecycle.is_held(delivery):
        if subscription_status == Subscription.Status.PAUSED:
            return "held: the subscription is paused"
        if subscription_status == Subscription.Status.PENDING_CONFIRMATION:
            return "held: the subscription's changed endpoint has not confirmed yet"
        return f"held: the endpoint is {endpoint_state}"
    if delivery.attempt_count:
        return (f"{delivery.attempt_count} attempt(s) failed; next attempt at "
                f"{delivery.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC" + error_words(error))
    return "waiting for its first attempt"


def last_handshake_words(subscription: Subscription) -> str:
    """Why the last confirmation request did not confirm, for a fix that says to send another."""
    if subscription.handshake_at is None or not subscription.handshake_problem:
        return ""
    return (f"; the last one, at {subscription.handshake_at:%Y-%m-%d %H:%M:%S} UTC, did not confirm: "
            f"{subscription.handshake_problem}")


def fix(outcome: str, delivery: Delivery | None, subscription: Subscription) -> str:
    """What an operator can do about it, if anything (the admin's buttons and the API's actions)."""
    if outcome == FanoutOutcome.FILTERED_OUT:
        return "none needed; change the subscription's filter policy if it should match such messages"
    if outcome == FanoutOutcome.NOT_CONFIRMED:
        if subscription.status == Subscription.Status.PENDING_CONFIRMATION:
            return ("resend the confirmation request (the subscription's page); later messages are then delivered"
                    + last_handshake_words(subscription))
        return "none: the subscription is confirmed now; later messages are delivered"
    if outcome == FanoutOutcome.SUBSCRIBED_AFTER:
        return "none: it receives messages published after it was created"
    if outcome == FanoutOutcome.NOT_ADDRESSED:
        whose = subscription.tenant.external_id if subscription.tenant else "?"
        return (f"none, if that was meant; to reach it, publish with tenant={whose!r} (or broadcast=true for every "
                f"tenant)")
    if delivery is None or delivery.status in (DeliveryStatus.SUCCEEDED, DeliveryStatus.IN_FLIGHT):
        return ""
    if lifecycle.is_waiting(delivery):
        return "see the earlier message of its ordering key that is still pending (the subscription's deliveries)"
    frozen = subscription.endpoint.state != "active"
    if delivery.status == DeliveryStatus.PENDING:
        if lifecycle.is_held(delivery):
            if subscription.status == Subscription.Status.PENDING_CONFIRMATION:
                return ("wait for the new endpoint to confirm, or resend the confirmation request (its page)"
                        + last_handshake_words(subscription))
            return ("resume the subscription" if subscription.status == Subscription.Status.PAUSED
                    else "enable the endpoint (its page)")
        return "retry now (the delivery's page) once the endpoint is fixed"
    if frozen:
        return "enable the endpoint (its page), then redrive the dead letters (the subscription's page)"
    return "redrive the dead letters (the subscription's page) or retry this one now (the delivery's page)"


def audience_words(message: Message) -> str:
    """Whom a message was published for, in words."""
    if message.broadcast:
        return "every tenant"
    if message.tenant_id is not None:
        return f"tenant {message.tenant.external_id!r}"
    if message.tenant_external_id:
        return (f"tenant {message.tenant_external_id!r}, not registered when it was published or deleted since (the "
                f"owner's own subscriptions only; a replay reaches the tenant once it is registered)")
    return "the owner's own subscriptions only"


def _reason(outcome: str, subscription: Subscription, message: Message, key: str | None) -> str:
    if outcome == FanoutOutcome.NOT_ADDRESSED:
        whose = subscription.tenant.external_id if subscription.tenant else "?"
        return (f"published for {audience_words(message)}; this subscription is tenant {whose!r}'s, which the "
                f"message was not for")
    if outcome == FanoutOutcome.FILTERED_OUT:
        return "filtered out: " + explain(
            subscription.filter_policy, message.attributes, key, scope=subscription.filter_policy_scope,
            body=body_of(message.payload, message.payload_is_text), event_types=subscription.event_types,
            event_type=message.event_type)
    if outcome == FanoutOutcome.NOT_CONFIRMED:
        since = (f"; confirmed since, at {subscription.confirmed_at:%Y-%m-%d %H:%M:%S}"
                 if subscription.confirmed_at and subscription.confirmed_at > message.published_at else "")
        return "the subscription was awaiting confirmation of its endpoint when the message was published" + since
    if outcome == FanoutOutcome.SUBSCRIBED_AFTER:
        return (f"the subscription was created at {subscription.created_at:%Y-%m-%d %H:%M:%S}, after the message "
                f"was published")
    if outcome == FanoutOutcome.PENDING:
        return "the fan-out job has not created this delivery yet"
    return "no delivery exists and no decision was recorded (published before Herald recorded them)"


def subscriptions(message: Message, subscription_id: int | None = None, outcome: str | None = None):
    """The topic's subscriptions the report has rows for, in id order, narrowed to one `outcome` in the database:
    a page of the report reads a page of subscriptions (`decisions`), whatever the topic's size."""
    found = Subscription.objects.filter(topic_id=message.topic_id).select_related("endpoint", "tenant").order_by("id")
    if subscription_id is not None:
        found = found.filter(id=subscription_id)
    if outcome is None:
        return found
    addressed = fanout.Audience.of(message).subscriptions()  # the rest are other tenants': not_addressed
    recorded = message.fanout_skipped or {}
    filtered = [sid for ids in (recorded.get(FanoutOutcome.FILTERED_OUT) or {}).values() for sid in ids]
    unconfirmed = list(recorded.get(FanoutOutcome.NOT_CONFIRMED) or [])
    held = {name: list(recorded.get(name) or []) for name in (FanoutOutcome.PAUSED,
                                                               FanoutOutcome.AWAITING_CONFIRMATION)}
    delivered = Exists(Delivery.objects.filter(message=message, replay=None, subscription_id=OuterRef("pk")))
    if outcome == FanoutOutcome.DELIVERY:
        return found.filter(delivered).exclude(id__in=[sid for ids in held.values() for sid in ids])
    if outcome in held:
        return found.filter(delivered, id__in=held[outcome])
    undelivered = found.exclude(delivered)
    if outcome == FanoutOutcome.NOT_ADDRESSED:  # as `decisions` says it: no delivery, not the message's audience
        return undelivered.exclude(addressed)
    undelivered = undelivered.filter(addressed)
    if outcome == FanoutOutcome.FILTERED_OUT:
        return undelivered.filter(id__in=filtered)
    if outcome == FanoutOutcome.NOT_CONFIRMED:
        return undelivered.filter(id__in=unconfirmed).exclude(id__in=filtered)
    rest = undelivered.exclude(id__in=filtered + unconfirmed)
    if outcome == FanoutOutcome.SUBSCRIBED_AFTER:
        return rest.filter(created_at__gt=message.published_at)
    rest = rest.filter(created_at__lte=message.published_at)
    if outcome == FanoutOutcome.PENDING:
        return rest if message.fanout_pending else rest.none()
    return rest.none() if message.fanout_pending else rest  # unrecorded


def decisions(message: Message, subscriptions_shown=None) -> list[dict]:
    """One row per subscription in `subscriptions_shown` (a page of `subscriptions(message)`; all of the topic's
    when None): outcome, reason in words (at most REASON_CHARS), and the delivery if any. Reads only those
    subscriptions' deliveries and last attempts."""
    shown = list(subscriptions(message) if subscriptions_shown is None else subscriptions_shown)
    deliveries = Delivery.objects.filter(message=message, replay=None, subscription_id__in=[s.id for s in shown]
                                         ).annotate(last_attempt_id=Subquery(
        Attempt.objects.filter(delivery=OuterRef("pk")).order_by("-number").values("id")[:1]))
    by_subscription = {d.subscription_id: d for d in deliveries}
    last_attempts = Attempt.objects.in_bulk([d.last_attempt_id for d in by_subscription.values() if d.last_attempt_id])
    skipped = _skipped_index(message)
    audience = fanout.Audience.of(message)
    rows = []
    for subscription in shown:
        recorded, key = skipped.get(subscription.id, (None, None))
        delivery = by_subscription.get(subscription.id)
        row = {"subscription": subscription.id, "endpoint": subscription.endpoint.url,
               "endpoint_id": subscription.endpoint_id,
               "subscription_status": subscription.status, "endpoint_state": subscription.endpoint.state,
               "tenant": subscription.tenant.external_id if subscription.tenant_id else None}
        if delivery is None and not audience.reaches(subscription.tenant_id):
            row.update(outcome=FanoutOutcome.NOT_ADDRESSED, delivery=None,
                       reason=_reason(FanoutOutcome.NOT_ADDRESSED, subscription, message, None),
                       fix=fix(FanoutOutcome.NOT_ADDRESSED, None, subscription))
        elif delivery is not None:
            held = recorded if recorded in (FanoutOutcome.PAUSED, FanoutOutcome.AWAITING_CONFIRMATION) else None
            state = delivery_state(delivery, last_attempts.get(delivery.last_attempt_id))
            row.update(outcome=held or FanoutOutcome.DELIVERY,
                       reason={FanoutOutcome.PAUSED: "paused at publish time; ",
                               FanoutOutcome.AWAITING_CONFIRMATION: "its changed endpoint was awaiting confirmation at "
                                                              "publish time; "}.get(held, "")
                       + _delivery_reason(delivery, subscription.endpoint.state, subscription.status,
                                          state["last_error"]),
                       delivery=state)
            row["fix"] = fix(row["outcome"], delivery, subscription)
        else:
            if recorded in (FanoutOutcome.FILTERED_OUT, FanoutOutcome.NOT_CONFIRMED):
                found = recorded
            elif subscription.created_at > message.published_at:
                found = FanoutOutcome.SUBSCRIBED_AFTER
            elif message.fanout_pending:
                found = FanoutOutcome.PENDING
            else:
                found = FanoutOutcome.UNRECORDED
            row.update(outcome=found, reason=_reason(found, subscription, message, key), delivery=None,
                       fix=fix(found, None, subscription))
        row["reason"] = clipped(row["reason"])
        rows.append(row)
    return rows


def clipped(reason: str) -> str:
    """A reason of at most REASON_CHARS: a filter's failing rule is quoted, and a rule may be long."""
    if len(reason) <= REASON_CHARS:
        return reason
    more = len(reason) - REASON_CHARS
    return reason[:REASON_CHARS] + f"… ({more} more characters)"


def counts(message: Message) -> dict[str, int]:
    """How many of the topic's subscriptions have each outcome (counted by the database, no rows read)."""
    found = {outcome: subscriptions(message, outcome=outcome).count() for outcome in OUTCOMES}
    return {outcome: count for outcome, count in found.items() if count}


"""Fan-out, the one module that decides it: which subscriptions a message goes to (`choose`, whose words are
`FanoutOutcome`), and creating its deliveries: inline for small topics, by a job for
large ones, so that publishing answers quickly whatever the fan-out size.

Every subscription of the topic is decided on at publish time, and the ones that get no delivery are recorded on
the message (`Message.fanout_skipped`): filtered out (by which attribute), not confirmed. A paused subscription gets
a held delivery and is recorded as paused too. Ids are stored grouped by outcome, so a topic of 10,000 subscriptions
costs one JSON value of ids, not 10,000 rows.

The fan-out job is idempotent (one delivery per message and subscription, conflicts ignored), and a message
whose job was lost (Redis flushed) is found by the reconciler through `fanout_pending` and fanned out again.
"""

import json
import logging
from datetime import timedelta
from functools import cached_property
from typing import NamedTuple

from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from delivery.conf import herald
from delivery.engine.plumbing import clock, redis_link, tracing
from delivery.engine.plumbing.shortcuts import Statement
from delivery.engine.state import lifecycle, ordering
from delivery.models import Delivery, Message
from delivery.rules.event_type_filter import event_type_matches
from delivery.rules.filters import policy as filters
from delivery.rules.vocabulary import AttemptQueue, FanoutOutcome
from subscriptions.models import Subscription

log = logging.getLogger(__name__)
CHUNK = 1000
LIVE = (Subscription.Status.CONFIRMED, Subscription.Status.PAUSED)


class Candidate(NamedTuple):
    """What fan-out needs of one subscription of the topic."""

    id: int
    endpoint_id: int
    status: str
    filter_policy: dict | None = None
    filter_policy_scope: str = filters.ATTRIBUTES
    event_types: list | None = None
    ordered: bool = False
    confirmed_before: bool = False  # awaiting confirmation of a changed endpoint, after an earlier consent
    tenant_id: int | None = None

    @property
    def held(self) -> bool:
        """Its deliveries are created held: paused, or its new endpoint has not confirmed yet."""
        return self.status == Subscription.Status.PAUSED or self.reconfirming

    @property
    def reconfirming(self) -> bool:
        return self.status == Subscription.Status.PENDING_CONFIRMATION and self.confirmed_before


class Facts:
    """What filters read of a message: attributes, event type, and the payload as JSON (parsed only if a
    MessageBody policy asks)."""

    def __init__(self, attributes: dict, event_type: str = "herald.message", payload=None,
                 payload_is_text: bool = False):
        self.attributes, self.event_type = attributes or {}, event_type
        self._payload, self._text = payload, payload_is_text

    @cached_property
    def body(self):
        return filters.body_of(self._payload, self._text)

    @classmethod
    def of(cls, message: Message) -> "Facts":
        return cls(message.attributes, message.event_type, message.payload, message.payload_is_text)


_decoded: dict[str, object] = {}  # a filter's JSON text → its value: decoding is most of reading 10,000 policies
DECODED_MAX = 50_000


def decoded(text: str | None):
    """The JSON value of `text`, decoded once per process (the same text always decodes to the same value, so a
    changed policy is a new key; nothing goes stale). The values are shared: never modify them."""
    if text is None:
        return None
    value = _decoded.get(text)
    if value is None:
        if len(_decoded) >= DECODED_MAX:
            _decoded.clear()
        value = _decoded[text] = json.loads(text)
    return value


class Audience(NamedTuple):
    """Whom a message is for: the owner's own subscriptions always; a tenant's when it is published for that tenant
    (`tenant_id`) or for every tenant (`broadcast`)."""

    tenant_id: int | None = None
    broadcast: bool = False

    def subscriptions(self) -> Q:
        """The subscriptions it reaches, as a filter on Subscription (an index range of (topic, tenant) each)."""
        if self.broadcast:
            return Q()
        if self.tenant_id is not None:
            return Q(tenant__isnull=True) | Q(tenant_id=self.tenant_id)
        return Q(tenant__isnull=True)

    def reaches(self, tenant_id: int | None) -> bool:
        """Does it reach a subscription of this tenant (None: the owner's own)? `subscriptions()` in Python."""
        return tenant_id is None or self.broadcast or tenant_id == self.tenant_id

    @classmethod
    def of(cls, message: Message) -> "Audience":
        return cls(message.tenant_id, message.broadcast)


def messages_for(subscription: Subscription) -> Q:
    """The messages of its topic a subscription receives, as a filter on Message (the replay's window): a tenant's
    subscription, those published for the tenant (also before it registered: by its external id), and broadcasts."""
    if subscription.tenant_id is None:
        return Q()
    before = Q(tenant__isnull=True, tenant_external_id=subscription.tenant.external_id) & ~Q(tenant_external_id="")
    return Q(tenant_id=subscription.tenant_id) | Q(broadcast=True) | before


def topic_subscriptions(topic_id: int, audience: Audience = Audience()) -> list[Candidate]:
    """The topic's subscriptions the audience reaches, with what their filters and ordering need: for a message of
    one tenant, the owner's and that tenant's only (however many tenants subscribe to the topic). The filters are
    read as text and decoded through `decoded`, so publishing to a topic of 10,000 filtering subscriptions does
    not parse 10,000 policies every time. The query is compiled once per process for each kind of audience."""
    if audience.broadcast:
        rows = AUDIENCE_SUBSCRIPTIONS["broadcast"].rows(topic_id)
    elif audience.tenant_id is not None:
        rows = AUDIENCE_SUBSCRIPTIONS["tenant"].rows(topic_id, audience.tenant_id)
    else:
        rows = AUDIENCE_SUBSCRIPTIONS["owner"].rows(topic_id)
    return [Candidate(sid, eid, status, decoded(policy), scope, decoded(types), ordered, confirmed is not None,
                      tenant)
            for sid, eid, status, policy, scope, types, ordered, confirmed, tenant in rows]


def _subscriptions_reached(topic_id: int, audience: Audience):
    return Subscription.objects.filter(audience.subscriptions(), topic_id=topic_id).annotate(
        policy_text=Cast("filter_policy", TextField()), types_text=Cast("event_types", TextField())).values_list(
        "id", "endpoint_id", "status", "policy_text", "filter_policy_scope", "types_text", "ordered_delivery",
        "confirmed_at", "tenant_id")


# Planned for their values on every run (bound=False): how many of a topic's subscriptions a tenant's publish reaches
# decides the plan (a generic plan, made for any topic, could read all of a topic's tenants to find one's).
AUDIENCE_SUBSCRIPTIONS = {
    "broadcast": Statement(lambda topic: _subscriptions_reached(topic, Audience(broadcast=True)), int, bound=False),
    "tenant": Statement(lambda topic, tenant: _subscriptions_reached(topic, Audience(tenant)), int, int, bound=False),
    "owner": Statement(lambda topic: _subscriptions_reached(topic, Audience()), int, bound=False),
}


def failing_filter(facts: Facts, policy, scope: str = filters.ATTRIBUTES, event_types=None) -> str | None:
    """The key the message fails among a subscription's filters (the event-type filter first), or None."""
    if event_types and not event_type_matches(event_types, facts.event_type):
        return filters.EVENT_TYPE_KEY
    if not policy:
        return None
    if scope == filters.BODY:
        return filters.failing_key(policy, facts.attributes, scope=filters.BODY, body=facts.body)
    return filters.failing_key(policy, facts.attributes)


def choose(subscriptions: list[Candidate], facts: Facts) -> tuple[list[Candidate], dict]:
    """(chosen, skipped): the live subscriptions whose filters match, and the record of the others,
    {"filtered_out": {key: [ids]}, "not_confirmed": [ids], "paused": [ids], "held_for_confirmation": [ids]}."""
    chosen, filtered, unconfirmed, paused, reconfirming = [], {}, [], [], []
    for candidate in subscriptions:
        if candidate.status not in LIVE and not candidate.reconfirming:
            unconfirmed.append(candidate.id)
            continue
        key = failing_filter(facts, candidate.filter_policy, candidate.filter_policy_scope, candidate.event_types)
        if key is not None:
            filtered.setdefault(key, []).append(candidate.id)
            continue
        chosen.append(candidate)
        if candidate.status == Subscription.Status.PAUSED:
            paused.append(candidate.id)
        elif candidate.reconfirming:
            reconfirming.append(candidate.id)
    found = ((FanoutOutcome.FILTERED_OUT, filtered), (FanoutOutcome.NOT_CONFIRMED, unconfirmed),
             (FanoutOutcome.PAUSED, paused), (FanoutOutcome.AWAITING_CONFIRMATION, reconfirming))
    skipped = {name: ids for name, ids in found if ids}
    return chosen, skipped


def targets(message: Message) -> list[Candidate]:
    """The live subscriptions of the message's topic whose filters match it."""
    return choose(topic_subscriptions(message.topic_id, Audience.of(message)), Facts.of(message))[0]


def build_deliveries(message: Message, chosen: list[Candidate], waiting: set[int] = frozenset()) -> list[Delivery]:
    """Unsaved deliveries. A paused subscription's are held (no due time) until it resumes, and so are those of a
    subscription whose changed endpoint has not confirmed yet; an ordered
    subscription's carry the message's ordering key, and wait while an earlier message of that key is unfinished
    (`waiting`: those subscriptions' ids, from `ordered_waiting`)."""
    key = message.ordering_key
    owner_id = message.topic.owner_id
    deliveries = []
    for candidate in chosen:
        keyed = key if candidate.ordered and key else None
        deliveries.append(lifecycle.new_delivery(
            message, subscription_id=candidate.id, endpoint_id=candidate.endpoint_id, owner_id=owner_id,
            tenant_id=candidate.tenant_id, due=message.published_at, hold=candidate.held, ordering_key=keyed,
            behind=bool(keyed) and candidate.id in waiting))
    return deliveries


def ordered_waiting(topic_id: int, key: str | None, chosen: list[Candidate], in_batch: set[int] = frozenset()):
    """For a message with an ordering key, inside the publishing transaction: lock the (topic, key), and return
    the ordered subscriptions among `chosen` whose new delivery must wait (an earlier one of the key is
    unfinished, in the database or among `in_batch`, earlier entries of the same batch)."""
    ordered = [c.id for c in chosen if c.ordered]
    if not key or not ordered:
        return set()
    ordering.lock([(topic_id, key)])
    return ordering.busy([i for i in ordered if i not in in_batch], key) | (set(ordered) & in_batch)


def enqueue_fan_out(message_id) -> None:
    try:
        redis_link.queue(AttemptQueue.DELIVERIES).enqueue(fan_out, str(message_id), result_ttl=0,
                                                  job_timeout=herald.JOB_TIMEOUT_SECONDS)
    except Exception:  # Redis down: the reconciler finds the message by fanout_pending
        log.exception("could not enqueue the fan-out of message %s; the reconciler will retry", message_id)


def fan_out(message_id: str) -> int:
    """The RQ job: create the message's deliveries in chunks, then ask for a pump to send them."""
    message = Message.objects.filter(id=message_id, fanout_pending=True).first()
    if message is None:
        return 0
    if message.ordering_key and Message.objects.filter(
            topic_id=message.topic_id, ordering_key=message.ordering_key, fanout_pending=True,
            published_at__lt=message.published_at).exists():
        return 0  # an earlier message of its key is not fanned out yet: the reconciler brings this one back later
    with tracing.child("herald fan-out", {"herald.message": str(message.id), "herald.job": True},
                       stored=message.trace_parent) as span:
        chosen = targets(message)
        for start in range(0, len(chosen), CHUNK):
            with transaction.atomic():
                part = chosen[start:start + CHUNK]
                waiting = ordered_waiting(message.topic_id, message.ordering_key, part)
                built = build_deliveries(message, part, waiting)
                lifecycle.created(Delivery.objects.bulk_create(built, ignore_conflicts=True))
        tracing.annotate(span, {"herald.deliveries": len(chosen)})
    Message.objects.filter(id=message.id).update(fanout_pending=False)
    return len(chosen)


def requeue_lost_fan_outs(now=None) -> int:
    now = now or clock.now()
    stale = now - timedelta(seconds=herald.RECONCILE_AFTER_SECONDS)
    lost = list(Message.objects.filter(fanout_pending=True, published_at__lt=stale).values_list("id", flat=True)[:100])
    for message_id in lost:
        enqueue_fan_out(message_id)
    return len(lost)

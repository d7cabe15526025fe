"""Publishing, one path for one message and for a batch: store the messages and their deliveries in one
transaction (or, for a large topic, hand a message's deliveries to a fan-out job), and ask for a pump after commit.

    message_publish(...)            → publish_entries(topic, [Entry(...)])
    message_publish_batch(entries)  → publish_entries(topic, entries)

Entries without an idempotency key are written together (the topic's subscriptions read once, two bulk inserts);
an entry with a key is checked against the message its key already names and written in a transaction of its own,
so a key's race or conflict concerns that entry alone.
"""

import hashlib
import json
import logging
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.urls import reverse

from delivery.conf import herald
from delivery.engine.accounts import catalog, tenancy
from delivery.engine.intake import fanout
from delivery.engine.plumbing import clock, counters, tracing
from delivery.engine.plumbing.database import after_commit, in_callers_transaction, insert, insert_together
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import lifecycle, ordering
from delivery.models import Message
from delivery.rules import publish_input
from delivery.rules.wire import payload_bytes
from subscriptions.models import Tenant, Topic

log = logging.getLogger(__name__)
WRITE_TRIES = 3

IDEMPOTENCY_WINDOW = timedelta(hours=24)
# Callables told of each new message as it is written: (message, number of deliveries). delivery.testing's outbox
# is one; empty in production.
OBSERVERS: list = []
# While true (delivery.testing's outbox), messages and deliveries are written but nothing is sent: no pump is asked
# for and no fan-out job queued.
capturing: ContextVar[bool] = ContextVar("herald_capturing", default=False)
Published = tuple[Message, int, bool]  # (message, deliveries, created)


@dataclass(frozen=True)
class Entry:
    """One message to publish."""

    payload: object
    payload_is_text: bool = False
    event_type: str = "herald.message"
    event_version: str | None = None  # the version its payload is in (None: the latest of its type, if it has any)
    subject: str = ""
    attributes: dict = field(default_factory=dict)
    idempotency_key: str | None = None
    ordering_key: str | None = None
    tenant: str | None = None  # a tenant's external id: for its subscriptions and the owner's own only
    broadcast: bool = False  # for every tenant's subscriptions too
    tenant_id: int | None = None  # `tenant`, resolved among the topic owner's tenants when published
    unknown_tenant: str = "refuse"  # if `tenant` is not registered: refuse, create or record (publish_input)
    schema_mismatch: str = ""  # why the payload does not match its type's schema, where the type records it

    def fingerprint(self) -> str:
        """What a repeated idempotency key must repeat (the key itself aside)."""
        parts = {"payload": self.payload, "text": self.payload_is_text, "type": self.event_type,
                 "subject": self.subject, "attrs": self.attributes or {}}
        if self.ordering_key:
            parts["ordering_key"] = self.ordering_key
        if self.event_version:
            parts["event_version"] = self.event_version
        if self.tenant or self.broadcast:
            parts["audience"] = self.tenant or "*"
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    @property
    def audience(self) -> fanout.Audience:
        return fanout.Audience(self.tenant_id, self.broadcast)


def entry_from(data: dict, *, idempotency_key: str | None = None) -> Entry:
    """A publish body (`payload` or `message`, `event_type`, `subject`, `attributes`, `ordering_key`,
    `idempotency_key`) as an Entry: a 400 naming each bad field (delivery/rules/publish_input.py), a 413 for a
    payload over HERALD_MAX_PAYLOAD_BYTES. The API (after its serializer) and `events.publish` both come here."""
    found = publish_input.problems(data)
    if found:
        raise ApplicationError.of_problems(found)
    is_text = "message" in data
    payload = data["message"] if is_text else data["payload"]
    size, limit = len(payload_bytes(payload, is_text)), herald.MAX_PAYLOAD_BYTES
    if size > limit:
        raise ApplicationError(f"The payload is {size} bytes; the limit is {limit}.", status_code=413)
    return Entry(payload=payload, payload_is_text=is_text,
                 event_type=data.get("event_type", publish_input.DEFAULT_EVENT_TYPE),
                 event_version=data.get("event_version") or None, subject=data.get("subject", ""),
                 attributes=data.get("attributes") or {},
                 idempotency_key=data.get("idempotency_key") or idempotency_key,
                 ordering_key=data.get("ordering_key") or None, tenant=data.get("tenant") or None,
                 broadcast=bool(data.get("broadcast")), unknown_tenant=data.get("unknown_tenant") or "refuse")


def message_publish(*, topic: Topic, **fields) -> Published:
    """Publish one message (the fields of `Entry`). Returns (message, deliveries created, created); a repeated
    idempotency key returns the original message (created False), or a 409 if it came with another request."""
    return publish_one(topic, Entry(**fields))


def publish_one(topic: Topic, entry: Entry) -> Published:
    """`message_publish` for an Entry."""
    result = publish_entries(topic, [entry])[0]
    if isinstance(result, ApplicationError):
        raise result
    return result


def message_publish_batch(*, topic: Topic, entries: list[Entry]) -> list[Published | ApplicationError]:
    """Publish several messages to one topic, in order; returns (message, deliveries, created) for each, or the
    ApplicationError of an entry that could not be published (an idempotency key used with another request; the
    others are published all the same)."""
    return publish_entries(topic, entries)


def publish_entries(topic: Topic, entries: list[Entry]) -> list[Published | ApplicationError]:
    """The one path. Entries without a key cost one transaction together; each keyed entry is published on its own.
    When keyed entries and ordering keys mix, every entry goes on its own, in order, so the ordering keys keep the
    batch's order. With tracing on, all of it is one `herald publish` span, whose trace the messages keep."""
    tenants = {entry.tenant for entry in entries}
    with tracing.publishing(topic.name, len(entries), {
            "herald.owner": topic.owner_id, "herald.topic": topic.id,
            "herald.tenant": next(iter(tenants)) if len(tenants) == 1 else None}):
        return _publish_entries(topic, entries)


def _publish_entries(topic: Topic, entries: list[Entry]) -> list[Published | ApplicationError]:
    results: dict[int, Published | ApplicationError]
    known = catalog.types_of(topic.owner_id, (entry.event_type for entry in entries))
    results, versions = catalog.versions_published(known, entries)
    entries = [replace(entry, event_version=versions[n][0]) if n in versions else entry
               for n, entry in enumerate(entries)]
    refused, mismatched = catalog.refusals(known, entries, {n: schema for n, (_, schema) in versions.items()})
    results.update(refused)
    for n, why in mismatched.items():  # the event type records a mismatch and delivers
        entries[n] = replace(entries[n], schema_mismatch=why)
        log.warning("a message to topic %r is published all the same (on_mismatch=record): %s", topic.name, why)
    entries, unknown = addressed(topic, entries)
    results.update(unknown)  # entries refused here fail alone; the others are published all the same
    kept = [n for n in range(len(entries)) if n not in results]
    in_order = any(entries[n].ordering_key for n in kept) and any(entries[n].idempotency_key for n in kept)
    together = [] if in_order else [n for n in kept if not entries[n].idempotency_key]
    if together:
        for n, published in zip(together, write(topic, [entries[n] for n in together]), strict=True):
            results[n] = published
    for n in kept:
        if n not in results:
            try:
                results[n] = publish_alone(topic, entries[n])
            except ApplicationError as exc:  # its key was used with another request: this entry fails alone
                results[n] = exc
    return [results[n] for n in range(len(entries))]


def addressed(topic: Topic, entries: list[Entry]) -> tuple[list[Entry], dict[int, ApplicationError]]:
    """The entries with their tenants resolved among the topic owner's (one query). A tenant the owner does not
    have: a 400 for that entry (`unknown_tenant` "refuse"), the tenant registered now, within the owner's quota
    ("create"), or the message kept for the owner's own subscriptions only, with a warning in the log ("record")."""
    names = {entry.tenant for entry in entries if entry.tenant and entry.tenant_id is None}
    if not names:
        return entries, {}
    known = dict(Tenant.objects.filter(owner_id=topic.owner_id, external_id__in=names)
                 .values_list("external_id", "id"))
    resolved, unknown = [], {}
    for n, entry in enumerate(entries):
        if entry.tenant and entry.tenant_id is None and entry.tenant not in known:
            if entry.unknown_tenant == "create":
                try:
                    known[entry.tenant] = tenancy.tenant_create(owner=topic.owner, external_id=entry.tenant)[0].id
                except ApplicationError as exc:  # the owner's tenant quota
                    unknown[n] = ApplicationError(f"{entry.tenant!r} is not registered and cannot be created: "
                                                  f"{exc.as_payload().get('detail', exc)}", field="tenant")
            elif entry.unknown_tenant == "record":
                log.warning("a message to topic %r names tenant %r, which is not registered: it is kept for your own "
                            "subscriptions only (unknown_tenant=record)", topic.name, entry.tenant)
            else:
                unknown[n] = ApplicationError(
                    f"You have no tenant {entry.tenant!r}; register it first (POST {reverse('herald:tenant-list')}),"
                    f" or publish with unknown_tenant \"create\" or \"record\".", field="tenant")
        if entry.tenant and entry.tenant_id is None:
            entry = replace(entry, tenant_id=known.get(entry.tenant))
        resolved.append(entry)
    return resolved, unknown


def publish_alone(topic: Topic, entry: Entry) -> Published:
    """One entry in a transaction of its own; with an idempotency key, the message the key already names (within
    24 hours) is the answer instead."""
    key = entry.idempotency_key
    if key:
        existing = Message.objects.filter(topic=topic, idempotency_key=key).first()
        if existing is not None and existing.published_at > clock.now() - IDEMPOTENCY_WINDOW:
            return _repeated(existing, entry)
        if existing is not None:  # the key's 24 hours are over: it may name a new message now
            Message.objects.filter(id=existing.id).update(idempotency_key=None)
    try:
        return write(topic, [entry])[0]
    except IntegrityError:
        if not key:
            raise
        return _repeated(Message.objects.get(topic=topic, idempotency_key=key), entry)  # lost a race: same answer


def write(topic: Topic, entries: list[Entry]) -> list[Published]:
    """Messages and their deliveries written at once: the topic's subscriptions read once, the fan-out decided
    for each entry (`fanout.choose`), an ordering key's later deliveries written waiting behind its earlier ones
    (in the database, or earlier in `entries`), deliveries of a large fan-out left to a job.

    Outside the caller's transaction and without ordering keys, the messages and their deliveries are one
    statement (`insert_together`), atomic without BEGIN and COMMIT: the usual REST publish. Ordering keys (their
    locks and reads) and a caller's transaction (a savepoint keeps a failed write from aborting it) take a
    transaction of the write's own.

    A subscription deleted between the read of the topic's subscriptions and the insert of its delivery (a
    tenant removing its endpoint while its owner publishes) fails the insert's foreign key: nothing was written,
    and the write is made again, reading the subscriptions anew (WRITE_TRIES in all)."""
    for tries_left in range(WRITE_TRIES - 1, -1, -1):
        try:
            if any(entry.ordering_key for entry in entries) or in_callers_transaction():
                with transaction.atomic():
                    return _write(topic, entries, one_statement=False)
            return _write(topic, entries, one_statement=True)
        except IntegrityError as exc:
            if not tries_left or "foreign key" not in str(exc).lower():
                raise
            log.info("a subscription of topic %r went while publishing to it; publishing again", topic.name)
    raise AssertionError("unreachable")


def _write(topic: Topic, entries: list[Entry], *, one_statement: bool) -> list[Published]:
    # Every ordering key of the write locked first, in the one order releases use: taken entry by entry (in
    # publish order) a batch of two keys could deadlock with a worker releasing the same keys.
    ordering.lock((topic.id, entry.ordering_key) for entry in entries if entry.ordering_key)
    audiences: dict[fanout.Audience, list] = {}  # each audience's subscriptions, read once per write
    now = clock.now()
    messages, chosen_for, waiting_for = [], [], []
    keyed: dict[str, set[int]] = {}  # ordering key → ordered subscriptions given a delivery in this write
    trace_parent = tracing.current_traceparent()  # the publish's span, which its attempts will continue
    with tracing.child("herald fan-out", {"herald.messages": len(entries)}) as span:
        for entry in entries:
            if entry.audience not in audiences:
                audiences[entry.audience] = fanout.topic_subscriptions(topic.id, entry.audience)
            chosen, skipped = fanout.choose(audiences[entry.audience], fanout.Facts(
                entry.attributes, entry.event_type, entry.payload, entry.payload_is_text))
            large = len(chosen) > herald.INLINE_FANOUT
            key = entry.ordering_key
            waiting = set() if large else fanout.ordered_waiting(topic.id, key, chosen, keyed.get(key, set()))
            if key and not large:
                keyed.setdefault(key, set()).update(c.id for c in chosen if c.ordered)
            messages.append(_message(topic, entry, now, fanout_pending=large, fanout_skipped=skipped,
                                     trace_parent=trace_parent))
            chosen_for.append(chosen)
            waiting_for.append(waiting)
        inline = [len(chosen) for chosen, m in zip(chosen_for, messages, strict=True) if not m.fanout_pending]
        tracing.annotate(span, {"herald.deliveries": sum(inline)})  # a large fan-out's deliveries: its job's
    deliveries = []
    for message, chosen, waiting in zip(messages, chosen_for, waiting_for, strict=True):
        if not message.fanout_pending:
            deliveries += fanout.build_deliveries(message, chosen, waiting)
    if one_statement and not deliveries:
        insert(messages)  # one statement (a transaction of its own beyond a thousand messages)
    elif not (one_statement and insert_together(messages, deliveries)):
        with transaction.atomic(savepoint=False):  # within write's own transaction, or one for the two inserts
            insert(messages)
            insert(deliveries, batch_size=1000)
    # What follows the write: after its commit (inside a transaction), at once after the one statement.
    for message, chosen in zip(messages, chosen_for, strict=True):
        for observer in OBSERVERS:
            observer(message, len(chosen))
        if message.fanout_pending and not capturing.get():  # answer now; a job writes the deliveries
            after_commit(fanout.enqueue_fan_out, message.id)
    if not capturing.get():
        counters.add_after_commit({counters.field("messages_published"): len(messages)})
        lifecycle.created(deliveries)
    return [(message, len(chosen), True) for message, chosen in zip(messages, chosen_for, strict=True)]


def _message(topic: Topic, entry: Entry, now, **written) -> Message:
    """The message row of an entry (unsaved); `written`: what the write decided (its fan-out, its trace)."""
    return Message(
        topic=topic, payload=entry.payload, payload_is_text=entry.payload_is_text, event_type=entry.event_type,
        event_version=entry.event_version or "",
        subject=entry.subject, attributes=entry.attributes or {}, published_at=now,
        idempotency_key=entry.idempotency_key or None,
        request_fingerprint=entry.fingerprint() if entry.idempotency_key else "",  # what a repeated key compares
        ordering_key=entry.ordering_key or None, tenant_id=entry.tenant_id,
        tenant_external_id=entry.tenant if entry.tenant and entry.tenant_id is None else "",
        broadcast=entry.broadcast, schema_mismatch=entry.schema_mismatch, **written)


def _repeated(existing: Message, entry: Entry) -> Published:
    """The answer to a repeated idempotency key: the original message, if the request is the same."""
    if existing.request_fingerprint != entry.fingerprint():
        raise ApplicationError("This Idempotency-Key was already used with a different request.", status_code=409)
    pending = existing.fanout_pending
    count = len(fanout.targets(existing)) if pending else existing.deliveries.filter(replay=None).count()
    return existing, count, False


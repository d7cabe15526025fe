"""What a subscription's event versions are, and a preview of its upgrade (docs/versions.md, "Upgrading"), the same
through every door (the API's `event-version/preview/`, the portal's Upgrade panel, the console's page).

The preview takes the subscription's latest event of a type with versions (among its last `LOOKED_AT` deliveries),
else the catalog's example of the newest version of its first event type that has versions and an example, and
brings it down with the catalog's down-converters, as the worker would, to the version the endpoint receives now
and to the one it would receive pinned at `to_version`: one fresh sandbox within the transformations' limits
(transport/transforms), thrown away after. A step that fails is shown in place of its payload, with its reason and
line. Nothing is sent or stored. A `to_version` that is no version of the catalog, or a subscription with nothing
to preview, is a 400 naming `event_version`.
"""

import time
from dataclasses import dataclass

from delivery.engine.accounts import catalog
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Delivery, Message
from delivery.rules import event_type_filter, event_versions, send_shares
from delivery.transport import transforms
from subscriptions.models import EventTypeVersion, Subscription

LOOKED_AT = 100  # the latest deliveries searched for an event of a type with versions
NOTHING = ("nothing to preview: no event of a type with versions has been delivered to this subscription yet, and "
           "the catalog has no example of the newest version of the event types it receives")


@dataclass(frozen=True)
class Received:
    """What a subscription receives of one event type with versions: the version, and the type's latest."""

    event_type: str
    version: str
    latest: str

    @property
    def behind(self) -> bool:
        return self.version != self.latest


@dataclass(frozen=True)
class _Sample:
    event_type: str
    message: str | None  # the message's id; None: the catalog's example
    payload: object
    version: str  # the version the payload is in
    now_ms: int  # what the down-converters' clock says: the event's publish time


Catalog = dict[str, list[event_versions.Version]]  # {event type: its versions, oldest first}


def _versions(owner_id: int, types: list[str] | None = None, *, open_only: bool = False) -> Catalog:
    """{event type: its versions, oldest first} of the owner's catalog (of `types` only, when given; open to tenants
    only, with `open_only`)."""
    return {name: versions for (_, name), versions in
            catalog.down_converters([owner_id], types, open_only=open_only).items()}


def _receivable(subscription: Subscription) -> Catalog:
    """The versions of the types with versions that the subscription receives (for a tenant's, those open to
    tenants), in the order its event types name them, then by name."""
    found = _versions(subscription.topic.owner_id, open_only=subscription.tenant_id is not None)
    chosen = [name for name in subscription.event_types or [] if name in found]
    ordered = [*dict.fromkeys(chosen), *sorted(found)]
    return {name: found[name] for name in dict.fromkeys(ordered)
            if event_type_filter.event_type_matches(subscription.event_types, name)}


def received(subscription: Subscription) -> list[Received]:
    """For each event type with versions the subscription receives: the version it receives, and the latest."""
    return [Received(name, event_versions.received([v.name for v in versions], subscription.event_version),
                     event_versions.latest([v.name for v in versions]))
            for name, versions in _receivable(subscription).items()]


def newest(subscription: Subscription) -> str:
    """The newest version of the types the subscription receives ("" when they have none): where an upgrade goes."""
    return max((each.latest for each in received(subscription)), default="")


def version_names(owner_id: int) -> list[str]:
    """The version names of the owner's catalog, newest first: what a subscription may be pinned to."""
    return sorted({v.name for versions in _versions(owner_id).values() for v in versions}, reverse=True)


def _latest_event(subscription: Subscription) -> _Sample | None:
    """The subscription's latest delivered event of a type with versions, among its last LOOKED_AT deliveries."""
    ids = list(Delivery.objects.filter(subscription=subscription).order_by("-id")
               .values_list("message_id", flat=True)[:LOOKED_AT])
    versioned = set(Message.objects.filter(id__in=ids).exclude(event_version="").values_list("id", flat=True))
    chosen = next((id_ for id_ in ids if id_ in versioned), None)
    if chosen is None:
        return None
    message = Message.objects.only("id", "event_type", "event_version", "payload", "published_at").filter(
        id=chosen).first()
    if message is None:  # purged meanwhile
        return None
    return _Sample(message.event_type, str(message.id), message.payload, message.event_version,
                   int(message.published_at.timestamp() * 1000))


def _example(subscription: Subscription, receivable: Catalog) -> _Sample | None:
    """The catalog's example of the newest version of the subscription's first type that has one."""
    newest_of = {name: versions[-1].name for name, versions in receivable.items()}
    rows = EventTypeVersion.objects.filter(
        event_type__owner_id=subscription.topic.owner_id, event_type__name__in=list(newest_of),
        name__in=set(newest_of.values()), example__isnull=False).values_list("event_type__name", "name", "example")
    examples = {type_name: example for type_name, name, example in rows if newest_of[type_name] == name}
    name = next((name for name in receivable if name in examples), None)
    if name is None:
        return None
    return _Sample(name, None, examples[name], newest_of[name], int(time.time() * 1000))


def preview(subscription: Subscription, to_version: str) -> dict:
    """The subscription's latest event (or an example) as the endpoint receives it now and as it would at
    `to_version` ("": the latest): {event_type, message, current: {version, payload}, upgraded: {...}}, where a
    step that fails gives {version, error, line} in place of the payload."""
    to_version = catalog.checked_pin(subscription.topic.owner_id, to_version)
    receivable = _receivable(subscription)
    sample = _latest_event(subscription) or _example(subscription, receivable)
    if sample is None:
        raise ApplicationError(NOTHING, field="event_version")
    versions = receivable.get(sample.event_type) or _versions(subscription.topic.owner_id, [sample.event_type]).get(
        sample.event_type, [])
    names = [v.name for v in versions]
    shown = {side: _rendered(subscription, sample, versions, event_versions.received(names, pin))
             for side, pin in (("current", subscription.event_version), ("upgraded", to_version))}
    return {"event_type": sample.event_type, "message": sample.message, **shown}


def _rendered(subscription: Subscription, sample: _Sample, versions, target: str) -> dict:
    """The sample brought down to `target` (as published when it is older: there are no up-converters)."""
    steps = event_versions.down_steps(versions, sample.version, target)
    if not steps:
        return {"version": sample.version, "payload": sample.payload}
    outcome = transforms.run_steps(steps, sample.event_type, sample.payload, url=subscription.endpoint.url,
                                   now_ms=sample.now_ms,
                                   share=send_shares.share_of(subscription.topic.owner_id, subscription.tenant_id))
    if not outcome.ok:
        return {"version": target, "error": f"{outcome.step}: {outcome.error}", "line": outcome.line}
    if outcome.cancel:
        return {"version": target, "error": "a down-converter cancelled the send: nothing would be sent",
                "line": None}
    return {"version": target, "payload": outcome.payload}

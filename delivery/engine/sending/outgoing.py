"""From claimed rows to requests: each row's envelope (its message, its subscription's secrets and delivery
headers), batches for subscriptions that take them, and the built, signed (and OAuth2-authorized) requests. A row
or batch whose request cannot be built fails alone, inside Herald, as an `internal` try."""

import functools
import logging
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import replace

from delivery.conf import VERSION
from delivery.engine.accounts import catalog
from delivery.engine.plumbing import clock
from delivery.engine.sending import oauth, recording
from delivery.engine.sending.recording import Tried
from delivery.models import Delivery
from delivery.rules import batching, delivery_headers, event_versions, wire
from subscriptions.models import Subscription
from subscriptions.secrets import decrypt

log = logging.getLogger(__name__)


def extra_headers(subscription: Subscription, attributes: dict) -> tuple[dict, frozenset]:
    """The subscription's delivery headers for a message with `attributes` (secret values decrypted), and the
    names of the secret ones. A secret no key decrypts fails the try inside Herald, saying so."""
    stored = [header for header in subscription.delivery_headers or []
              if header["name"].lower() not in delivery_headers.TRACE_HEADERS]  # stored before they were reserved
    if not stored:
        return {}, frozenset()
    plain = [{**header, "value": decrypt(header["value"])} if header.get("secret") else header for header in stored]
    return delivery_headers.resolve(plain, attributes), frozenset(h["name"] for h in stored if h.get("secret"))


def envelope(delivery: Delivery, policy) -> wire.Envelope:
    message, subscription = delivery.message, delivery.subscription
    headers, secret = extra_headers(subscription, message.attributes)
    return wire.Envelope(
        message_id=str(message.id),
        topic_name=message.topic.name,
        event_type=message.event_type,
        subject=message.subject,
        published_at=message.published_at,
        payload=message.payload,
        payload_is_text=message.payload_is_text,
        subscription_id=subscription.id,
        url=delivery.endpoint.url,
        raw=subscription.raw_message_delivery,
        secrets=subscription.signing_secrets(clock.now()),
        content_type=policy.content_type,
        user_agent=f"Herald/{VERSION}",
        client_certificate=subscription.client_credentials(),
        extra_headers=headers,
        secret_headers=secret,
        replay=delivery.replay_id,
        event_version=message.event_version,
    )


def transformation_code(subscription: Subscription) -> str:
    """The subscription's transformation, when it has one turned on ("" otherwise)."""
    transformation = subscription.transformation
    if not isinstance(transformation, dict) or not transformation.get("enabled", True):
        return ""
    code = transformation.get("code")
    return code if isinstance(code, str) else ""


def versions_of(deliveries: list[Delivery]) -> dict[tuple[int, str], list[event_versions.Version]]:
    """{(owner, event type): its versions} for the deliveries of versioned events (one query; none if there are
    none)."""
    wanted = {(d.owner_id, d.message.event_type) for d in deliveries}
    if not wanted:
        return {}
    return catalog.down_converters({owner for owner, _ in wanted}, {name for _, name in wanted})


def in_pinned_version(delivery: Delivery, envelope: wire.Envelope, known: dict) -> tuple[tuple, wire.Envelope]:
    """The down-converters that bring the delivery's event to the version its subscription is pinned to, and the
    envelope saying the version it goes out in (docs/versions.md)."""
    published = envelope.event_version
    versions = known.get((delivery.owner_id, envelope.event_type), []) if published else []
    target = event_versions.received([v.name for v in versions], delivery.subscription.event_version)
    steps = event_versions.down_steps(versions, published, target)
    return steps, replace(envelope, event_version=target) if steps else envelope


def rendering(subscription: Subscription, envelope: wire.Envelope, request: wire.OutgoingRequest, number: int,
              now, steps: tuple = ()) -> wire.Rendering:
    """What the transport runs before sending: the down-converters `steps`, then the subscription's handler, on
    the message's payload; then the request, signed, with the OAuth2 credentials `request` carries (the handler's
    body, or the event with its payload in the version it goes out in)."""
    code = transformation_code(subscription)
    return wire.Rendering(event_type=envelope.event_type, payload=envelope.payload,
                          steps=(*steps, ("", code)) if code else tuple(steps),
                          now_ms=int(envelope.published_at.timestamp() * 1000),
                          finish=functools.partial(transformed if code else converted, envelope, number, now,
                                                   request.credentials))


def transformed(envelope: wire.Envelope, number: int, now, credentials, payload, method: str) -> wire.OutgoingRequest:
    return replace(wire.transformed_request(envelope, payload, method, attempt_number=number, now=now),
                   credentials=credentials)


def converted(envelope: wire.Envelope, number: int, now, credentials, payload, _method: str) -> wire.OutgoingRequest:
    """The event as it always goes out, its payload brought to its subscription's version."""
    return replace(wire.build_request(replace(envelope, payload=payload), attempt_number=number, now=now),
                   credentials=credentials)


def batched(ready: list, probes: set[int]) -> tuple[list[list], dict]:
    """The requests to make: each row alone, except a batching subscription's rows (`max_events_per_batch` > 1),
    cut into batches in publish order. A probe always goes alone (a batch of one). Returns the units and the
    envelopes made to measure the batched rows, for `build_requests` to use again. A row whose envelope cannot be
    made goes alone, so `build_requests` fails it by itself."""
    units, by_subscription, prepared = [], defaultdict(list), {}
    for delivery, policy in ready:
        if delivery.subscription.max_events_per_batch > 1 and delivery.id not in probes:
            try:
                prepared[delivery.id] = envelope(delivery, policy)
            except Exception:
                units.append([(delivery, policy)])
                continue
            by_subscription[delivery.subscription_id].append((delivery, policy))
        else:
            units.append([(delivery, policy)])
    for items in by_subscription.values():
        items.sort(key=lambda item: item[0].id)
        subscription = items[0][0].subscription
        sizes = [len(wire.event_bytes(prepared[delivery.id])) for delivery, _ in items]
        units += batching.cut(items, sizes, max_events=subscription.max_events_per_batch,
                              preferred_bytes=subscription.preferred_batch_size_kb * 1024)
    return units, prepared


def build_requests(units: list[list], failed: list[Tried], queue_name: str, prepared: dict | None = None) -> list:
    """(unit, numbers, request) to send, a unit being the rows one request carries; a unit whose request cannot be
    built fails alone (each of its rows gets the failed try). `prepared`: envelopes `batched` already made."""
    built, prepared = [], prepared or {}
    known = versions_of([unit[0][0] for unit in units if len(unit) == 1 and unit[0][0].message.event_version])
    for unit in units:
        numbers = [delivery.attempt_count + 1 for delivery, _ in unit]
        subscription = unit[0][0].subscription
        try:
            envelopes = [prepared.get(delivery.id) or envelope(delivery, policy) for delivery, policy in unit]
            now, steps = clock.now(), ()
            if subscription.max_events_per_batch == 1:  # a batching subscription always receives batches
                steps, envelopes[0] = in_pinned_version(unit[0][0], envelopes[0], known)
                request = wire.build_request(envelopes[0], attempt_number=numbers[0], now=now)
            else:
                request = wire.build_batch_request(envelopes, attempt_number=max(numbers), now=now)
            if oauth.configured(subscription):
                request = oauth.authorize(request, subscription)
            if subscription.max_events_per_batch == 1 and (steps or transformation_code(subscription)):
                request = replace(request, rendering=rendering(subscription, envelopes[0], request, numbers[0], now,
                                                               steps))
        except Exception as exc:
            log.exception("deliveries %s: their request could not be built", [d.id for d, _ in unit])
            failed.extend(recording.internal_failure(delivery, policy, exc, queue_name) for delivery, policy in unit)
            continue
        built.append((unit, numbers, request))
    return built


def fan_in(future, count: int) -> list:
    """`count` futures that complete with `future` (a batch's request): one per row it carries, so recording,
    journaling and settling see one send per delivery, as for requests of their own."""
    members = [Future() for _ in range(count)]

    def done(parent) -> None:
        for member in members:
            if parent.cancelled():
                member.cancel()
            elif parent.exception() is not None:
                member.set_exception(parent.exception())
            else:
                member.set_result(parent.result())

    future.add_done_callback(done)
    return members

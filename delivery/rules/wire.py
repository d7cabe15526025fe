"""What an endpoint receives: the body and headers of one attempt (pure; no Django).

Default: a CloudEvents 1.0 structured-mode JSON event. With raw delivery: the payload as published plus the
CloudEvents binary-mode `ce-*` headers. With batching: a CloudEvents batch (a JSON array of structured events).
Always the Standard Webhooks headers and Herald's own.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from urllib.parse import quote

from delivery.rules import signing

CLOUDEVENTS_CONTENT_TYPE = "application/cloudevents+json; charset=utf-8"
CLOUDEVENTS_BATCH_CONTENT_TYPE = "application/cloudevents-batch+json; charset=utf-8"
# The payload's event version as a CloudEvents extension attribute (`ce-eventversion` in binary mode), and as a
# header of Herald's on every request (docs/versions.md, "On the wire").
VERSION_ATTRIBUTE = "eventversion"
VERSION_HEADER = "herald-event-version"


@dataclass(frozen=True)
class Envelope:
    """The parts of a message and its subscription that shape the request."""

    message_id: str
    topic_name: str
    event_type: str
    subject: str
    published_at: datetime
    payload: object
    payload_is_text: bool
    subscription_id: int
    url: str
    raw: bool
    secrets: tuple[str, ...]
    content_type: str | None = None  # requestPolicy.headerContentType, for raw delivery
    user_agent: str = "Herald"
    client_certificate: tuple[str, str] | None = field(default=None, repr=False)  # (certificate, key) PEM, mTLS
    # The subscription's delivery headers for this message (secret values in plaintext), and which are secret.
    extra_headers: dict[str, str] = field(default_factory=dict, repr=False)
    secret_headers: frozenset[str] = frozenset()
    replay: int | None = None  # the replay that re-delivers this message, if any
    event_version: str = ""  # the version of its event type the payload is in, as sent (docs/versions.md)


@dataclass(frozen=True)
class Rendering:
    """What the transport runs before a send (transport/transforms.py): `steps`, (name, JavaScript code) in order,
    each turning the webhook (`event_type`, `payload`) as the one before left it; then `finish(payload, method)`
    builds the signed request to send."""

    event_type: str
    payload: object
    steps: tuple[tuple[str, str], ...]
    now_ms: int  # what the code's clock says: the event's publish time
    finish: Callable[[object, str], "OutgoingRequest"] = field(repr=False, compare=False)


@dataclass(frozen=True)
class OutgoingRequest:
    url: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"  # PUT when a transformation says so
    client_certificate: tuple[str, str] | None = field(default=None, repr=False)  # presented for mTLS
    # OAuth2 client credentials (Credentials, delivery/engine/sending/oauth.py): the transport obtains the bearer
    # token as part of the send, and renews it once after a 401; None: no Authorization header of Herald's.
    credentials: object | None = field(default=None, repr=False, compare=False)
    secret_headers: frozenset[str] = frozenset()  # delivery headers whose values are never recorded
    # Run before the send (a transformation): the request is then the one its `finish` builds.
    rendering: Rendering | None = field(default=None, repr=False, compare=False)

    @property
    def recorded_headers(self) -> dict[str, str]:
        """The headers as an attempt stores them: a bearer token and secret delivery headers are never recorded."""
        if "Authorization" not in self.headers and not self.secret_headers and self.credentials is None:
            return self.headers
        recorded = {name: "(secret)" if name in self.secret_headers else value for name, value in self.headers.items()}
        if self.credentials is not None or ("Authorization" in recorded and "Authorization" not in self.secret_headers):
            recorded["Authorization"] = "Bearer (redacted)"
        return recorded


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def payload_bytes(payload: object, is_text: bool) -> bytes:
    if is_text:
        return str(payload).encode()
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def data_content_type(is_text: bool) -> str:
    return "text/plain; charset=utf-8" if is_text else "application/json"


def cloudevent(envelope: Envelope) -> dict:
    event = {
        "specversion": "1.0",
        "id": envelope.message_id,
        "source": f"/topics/{envelope.topic_name}",
        "type": envelope.event_type,
        "time": rfc3339(envelope.published_at),
        "datacontenttype": data_content_type(envelope.payload_is_text),
        "data": envelope.payload,
    }
    if envelope.subject:
        event["subject"] = envelope.subject
    if envelope.event_version:
        event[VERSION_ATTRIBUTE] = envelope.event_version
    return event


def header_value(value: str) -> str:
    """CloudEvents HTTP binding: percent-encode what is not printable ASCII, plus space, '"' and '%'."""
    return quote(value, safe="!#$&'()*+,-./:;<=>?@[\\]^_`{|}~")


def binary_headers(envelope: Envelope, content_type: str) -> dict[str, str]:
    """The CloudEvents binary-mode headers of a body that is not a CloudEvent (raw delivery, a transformed body)."""
    headers = {
        "Content-Type": content_type,
        "ce-specversion": "1.0",
        "ce-id": envelope.message_id,
        "ce-source": header_value(f"/topics/{envelope.topic_name}"),
        "ce-type": header_value(envelope.event_type),
        "ce-time": rfc3339(envelope.published_at),
    }
    if envelope.subject:
        headers["ce-subject"] = header_value(envelope.subject)
    if envelope.event_version:
        headers[f"ce-{VERSION_ATTRIBUTE}"] = envelope.event_version
    return headers


def transformed_request(envelope: Envelope, payload, method: str, *, attempt_number: int,
                        now: datetime) -> OutgoingRequest:
    """What a transformation's webhook sends: its payload as the JSON body (the CloudEvent's attributes in ce-*
    headers, as raw delivery has them), signed like any request, with its method."""
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    request = signed(envelope, body, binary_headers(envelope, "application/json"), message_id=webhook_id(envelope),
                     attempt_number=attempt_number, now=now)
    return replace(request, method=method)


def build_request(envelope: Envelope, *, attempt_number: int, now: datetime) -> OutgoingRequest:
    if envelope.raw:
        body = payload_bytes(envelope.payload, envelope.payload_is_text)
        headers = binary_headers(envelope, envelope.content_type or data_content_type(envelope.payload_is_text))
    else:
        body = json.dumps(cloudevent(envelope), separators=(",", ":"), ensure_ascii=False).encode()
        headers = {"Content-Type": CLOUDEVENTS_CONTENT_TYPE}
    return signed(envelope, body, headers, message_id=webhook_id(envelope), attempt_number=attempt_number, now=now)


def event_bytes(envelope: Envelope) -> bytes:
    """One event as a batch carries it (its size decides how batches are cut)."""
    return json.dumps(cloudevent(envelope), separators=(",", ":"), ensure_ascii=False).encode()


def build_batch_request(envelopes: list[Envelope], *, attempt_number: int, now: datetime) -> OutgoingRequest:
    """Several events of one subscription as one CloudEvents batch (`application/cloudevents-batch+json`: a JSON
    array of structured events), signed as one request. Its webhook-id names its members, so the same batch sent
    again keeps its id. Delivery headers taken from attributes go along only where every event agrees."""
    first = envelopes[0]
    body = b"[" + b",".join(event_bytes(envelope) for envelope in envelopes) + b"]"
    members = "\n".join(webhook_id(envelope) for envelope in envelopes)
    batch_id = "batch_" + hashlib.sha256(members.encode()).hexdigest()[:32]
    shared = {name: value for name, value in first.extra_headers.items()
              if all(envelope.extra_headers.get(name) == value for envelope in envelopes[1:])}
    headers = {"Content-Type": CLOUDEVENTS_BATCH_CONTENT_TYPE, "herald-batch-size": str(len(envelopes))}
    replays = sorted({envelope.replay for envelope in envelopes} - {None})
    if replays:
        headers["herald-replay"] = ",".join(str(replay) for replay in replays)
    return signed(replace(first, extra_headers=shared, replay=None, event_version=""), body, headers,
                  message_id=batch_id, attempt_number=attempt_number, now=now)


def webhook_id(envelope: Envelope) -> str:
    """The Standard Webhooks id: the message's id, the same for every retry. A replay is a new delivery the
    receiver asked for, so it gets its own id (`<message>-replay-<n>`) that dedupers keyed on webhook-id accept; the
    event keeps its CloudEvents id."""
    return envelope.message_id if envelope.replay is None else f"{envelope.message_id}-replay-{envelope.replay}"


def signed(envelope: Envelope, body: bytes, headers: dict, *, message_id: str, attempt_number: int,
           now: datetime) -> OutgoingRequest:
    """The request with the subscription's delivery headers, the Standard Webhooks headers signing `body` under
    `message_id`, and Herald's own (which delivery headers cannot override)."""
    timestamp = int(now.timestamp())
    headers = {**envelope.extra_headers, **headers}
    headers.update(
        {
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signing.signature_header(envelope.secrets, message_id, timestamp, body),
            "herald-attempt": str(attempt_number),
            "herald-subscription": str(envelope.subscription_id),
            "User-Agent": envelope.user_agent,
        }
    )
    if envelope.replay is not None:
        headers["herald-replay"] = str(envelope.replay)
    if envelope.event_version:
        headers[VERSION_HEADER] = envelope.event_version
    if any(name.startswith("ce-") for name in headers):  # a raw delivery: sign the attributes its headers carry
        headers[signing.ATTRIBUTES_SIGNATURE_HEADER] = signing.signature_header(
            envelope.secrets, message_id, timestamp, signing.attribute_bytes(headers))
    return OutgoingRequest(url=envelope.url, body=body, headers=headers, client_certificate=envelope.client_certificate,
                           secret_headers=envelope.secret_headers)

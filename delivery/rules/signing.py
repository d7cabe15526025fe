"""Standard Webhooks signatures (pure; no Django).

Symmetric: `v1,` + base64(HMAC-SHA256(key, f"{id}.{timestamp}.{body}")), the key being the base64 part of a
`whsec_` secret. Asymmetric: `v1a,` + base64(Ed25519 signature of the same content), made with a `whsk_` signing key
(base64 of the 32-byte private seed) and verified with its `whpk_` public key (base64 of the 32-byte public key).
During a rotation several signatures are sent, space-separated; a receiver accepts the request if any matches.
"""

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SECRET_PREFIX = "whsec_"
SIGNING_KEY_PREFIX = "whsk_"
PUBLIC_KEY_PREFIX = "whpk_"


SECRET_BYTES = (24, 64)  # a secret of your own: this many random bytes, at least and at most


def generate_secret(length: int = 32) -> str:
    """A Standard Webhooks signing secret: `whsec_` + base64 of `length` random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(length)).decode()


def secret_problem(value) -> str | None:
    """Why `value` cannot be a subscription's signing secret, or None: `whsec_` + standard base64 of 24 to 64
    bytes (what `generate_secret`, `manage.py herald_secret`, Svix and Convoy make)."""
    low, high = SECRET_BYTES
    expected = f"must be {SECRET_PREFIX} followed by the base64 of {low} to {high} random bytes (make one with " \
               f"`manage.py herald_secret`)"
    if not isinstance(value, str) or not value.startswith(SECRET_PREFIX):
        return expected
    try:
        raw = base64.b64decode(value[len(SECRET_PREFIX):], validate=True)
    except (ValueError, binascii.Error):
        return expected
    if not low <= len(raw) <= high:
        return f"{expected}; this one is {len(raw)} bytes"
    return None


def generate_signing_key() -> str:
    seed = Ed25519PrivateKey.generate().private_bytes_raw()
    return SIGNING_KEY_PREFIX + base64.b64encode(seed).decode()


def _private(signing_key: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(base64.b64decode(signing_key[len(SIGNING_KEY_PREFIX):]))


def public_key(signing_key: str) -> str:
    """The `whpk_` public key of a `whsk_` signing key."""
    raw = _private(signing_key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode()


def public_key_bytes(key: str) -> bytes:
    """The raw 32 bytes of a `whpk_` key (or of a `whsk_` key's public half)."""
    if key.startswith(SIGNING_KEY_PREFIX):
        key = public_key(key)
    return base64.b64decode(key[len(PUBLIC_KEY_PREFIX):])


def is_asymmetric(key: str) -> bool:
    return key.startswith((SIGNING_KEY_PREFIX, PUBLIC_KEY_PREFIX))


def secret_key(secret: str) -> bytes:
    raw = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    return base64.b64decode(raw)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    if secret.startswith(SIGNING_KEY_PREFIX):
        return "v1a," + base64.b64encode(_private(secret).sign(signed)).decode()
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(secrets: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)


def verify(secret: str, msg_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """Does any signature in `header` hold for `secret` (a `whsec_` secret, or a `whpk_`/`whsk_` key)?"""
    if is_asymmetric(secret):
        key = Ed25519PublicKey.from_public_bytes(public_key_bytes(secret))
        signed = f"{msg_id}.{timestamp}.".encode() + body
        for candidate in header.split():
            if not candidate.startswith("v1a,"):
                continue
            try:
                key.verify(base64.b64decode(candidate[4:]), signed)
                return True
            except (InvalidSignature, ValueError):
                continue
        return False
    expected = sign(secret, msg_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in header.split())


TIMESTAMP_TOLERANCE_SECONDS = 300

# A raw delivery carries the event's attributes in `ce-*` headers and its media type in Content-Type, outside the
# body that `webhook-signature` covers. This second Standard Webhooks signature, under the same id and timestamp,
# covers them as a JSON object: Content-Type and every ce-* header, names in lower case, values trimmed, keys sorted,
# no spaces ({"ce-id":"…","ce-source":"…","ce-type":"…","content-type":"application/json"}). Being JSON, it is
# verified (and returned parsed) by the official Standard Webhooks libraries like any body.
ATTRIBUTES_SIGNATURE_HEADER = "herald-attributes-signature"


def attribute_bytes(headers) -> bytes:
    """What the attributes signature covers, from a request's headers (any mapping of name to value)."""
    attributes = {name.lower(): value.strip() for name, value in headers.items()
                  if name.lower() == "content-type" or name.lower().startswith("ce-")}
    return json.dumps(attributes, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check(secrets: Iterable[str], msg_id: str | None, timestamp: str | None, header: str | None, body: bytes,
          now: float, tolerance: float = TIMESTAMP_TOLERANCE_SECONDS) -> str | None:
    """Why a request's Standard Webhooks signature does not hold (None when it does): any of `secrets` (both during
    a rotation) must have signed it, and its timestamp must be within `tolerance` seconds of `now` (replays)."""
    if not msg_id or not timestamp or not header:
        return "webhook-id, webhook-timestamp and webhook-signature are required"
    try:
        stamp = int(timestamp)
    except ValueError:
        return f"webhook-timestamp {timestamp[:40]!r} is not a number of seconds"
    if abs(now - stamp) > tolerance:
        return f"webhook-timestamp is {now - stamp:+.0f} s from now (tolerance {tolerance:g} s)"
    for secret in secrets:
        try:
            if verify(secret, msg_id, stamp, body, header):
                return None
        except ValueError:
            return "a secret is not a valid whsec_ secret or whpk_ key"
    return "no signature matches the secret(s)"

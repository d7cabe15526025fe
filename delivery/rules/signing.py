"""Standard Webhooks signatures (pure; no Django).

`webhook-signature` is `v1,` + base64(HMAC-SHA256(key, f"{id}.{timestamp}.{body}")), where the key is the base64
part of a `whsec_` secret. During a secret rotation several signatures are sent, space-separated.
"""

import base64
import hashlib
import hmac
from collections.abc import Iterable

SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    raw = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    return base64.b64decode(raw)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(secrets: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)


def verify(secret: str, msg_id: str, timestamp: int, body: bytes, header: str) -> bool:
    expected = sign(secret, msg_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in header.split())


TIMESTAMP_TOLERANCE_SECONDS = 300


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
            return "a secret is not a valid whsec_ secret"
    return "no signature matches the secret(s)"

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

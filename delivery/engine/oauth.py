"""OAuth2 client credentials for endpoints that want a bearer token (Event Grid's Entra authentication, Convoy's
OAuth2): Herald obtains the token from the subscription's token URL, caches it in Redis until shortly before it
expires (one fetch per token across all workers: whoever takes a short Redis lock fetches, the others wait for its
result), sends it as `Authorization: Bearer`, and on a 401 fetches a new one and sends once more before the attempt
counts as failed. The token URL passes the same address guard as every delivery (the request goes through the
transport), and neither the client secret nor a token is ever recorded: attempts store the header redacted."""

import hashlib
import json
import time
from dataclasses import replace
from urllib.parse import urlencode

from delivery.engine import redis_link
from delivery.rules.vocabulary import AttemptQueue
from delivery.rules.wire import OutgoingRequest
from delivery.transport import sender

REFRESH_MARGIN_SECONDS = 60  # a token is refreshed this long before it expires
LOCK_SECONDS = 15
WAIT_SECONDS = 10
FETCH_TIMEOUT = 10.0
_local: dict[str, tuple[str, float]] = {}  # cache key -> (token, monotonic time it stops being used)


class TokenError(Exception):
    """No access token could be obtained; the message says why (never the secret)."""


def configured(subscription) -> bool:
    return bool(subscription.oauth_token_url)


def cache_key(subscription) -> str:
    """Changes whenever the credentials or scope change, so a changed configuration never uses an old token."""
    material = "\\0".join([str(subscription.id), subscription.oauth_token_url, subscription.oauth_client_id,
                           subscription.oauth_scope, subscription.oauth_client_secret])
    return "herald:oauth:" + hashlib.sha256(material.encode()).hexdigest()


def fetch(subscription) -> tuple[str, float]:
    """(access token, seconds it lives) from the token endpoint, through the guarded transport."""
    form = {"grant_type": "client_credentials", "client_id": subscription.oauth_client_id,
            "client_secret": subscription.oauth_client_secret}
    if subscription.oauth_scope:
        form["scope"] = subscription.oauth_scope
    result = sender.send(OutgoingRequest(
        url=subscription.oauth_token_url, body=urlencode(form).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}),
        timeout=FETCH_TIMEOUT)
    if not result.ok:
        what = f"answered {result.status}" if result.status else f"failed: {result.error_detail}"
        raise TokenError(f"the token endpoint {what}")
    try:
        answer = json.loads(result.body_excerpt)
        token, lifetime = answer["access_token"], float(answer.get("expires_in", 3600))
    except (ValueError, KeyError, TypeError):
        raise TokenError("the token endpoint's answer has no access_token") from None
    if not isinstance(token, str) or not token:
        raise TokenError("the token endpoint's access_token is empty")
    return token, lifetime


def bearer(subscription, *, refresh: bool = False) -> str:
    """The subscription's access token: from this process, else Redis, else fetched by one worker for all."""
    key = cache_key(subscription)
    now = time.monotonic()
    if not refresh:
        local = _local.get(key)
        if local and local[1] > now:
            return local[0]
    redis = redis_link.connection(AttemptQueue.DELIVERIES)
    stale = _local.pop(key, (None, 0))[0] if refresh else None
    deadline = now + WAIT_SECONDS
    while True:
        cached = redis.get(key)
        if cached is not None and cached.decode() != stale:
            return _remember(key, cached.decode(), redis.ttl(key))
        if redis.set(key + ":lock", "1", nx=True, ex=LOCK_SECONDS):
            try:
                token, lifetime = fetch(subscription)
                keep = max(1, int(lifetime - REFRESH_MARGIN_SECONDS))
                redis.set(key, token, ex=keep)
                return _remember(key, token, keep)
            finally:
                redis.delete(key + ":lock")
        if time.monotonic() > deadline:
            raise TokenError("another worker is still fetching the access token")
        time.sleep(0.05)


def _remember(key: str, token: str, seconds: float) -> str:
    _local[key] = (token, time.monotonic() + max(0.0, float(seconds)))
    return token


def authorize(request: OutgoingRequest, subscription) -> OutgoingRequest:
    """The request with its bearer token, and the way to renew it once after a 401."""
    token = bearer(subscription)

    def reauthorize() -> dict:
        return {**request.headers, "Authorization": f"Bearer {bearer(subscription, refresh=True)}"}

    return replace(request, headers={**request.headers, "Authorization": f"Bearer {token}"}, reauthorize=reauthorize)

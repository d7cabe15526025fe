"""OAuth2 client credentials for endpoints that want a bearer token (Event Grid's Entra authentication, Convoy's
OAuth2): Herald obtains the token from the subscription's token URL, caches it in Redis until shortly before it
expires (one fetch per token across all workers: whoever takes a short Redis lock fetches, the others wait for its
result), sends it as `Authorization: Bearer`, and on a 401 fetches a new one and sends once more before the attempt
counts as failed.

The token is obtained on the transport's event loop, as part of the send it is for: inside that send's deadline and
its endpoint's room, never on a worker's job thread, so a token URL that answers slowly (or not at all) holds only
the sends that need its token. A failed fetch is remembered with a growing backoff (HERALD_OAUTH_FAILURE_BACKOFF…):
until it runs out, sends that need the token fail at once, saying why, instead of asking a failing token URL again.

The token URL passes the same address guard as every delivery (the request goes through the transport), and neither
the client secret nor a token is ever recorded: attempts store the header redacted."""

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from delivery.engine.plumbing import redis_link
from delivery.rules import answers
from delivery.rules.vocabulary import AttemptQueue
from delivery.rules.wire import OutgoingRequest
from delivery.transport import sender

log = logging.getLogger(__name__)
DEFAULT_LIFETIME = 3600  # seconds a token lives when its endpoint does not say (or says nonsense)
MAX_LIFETIME = 86400  # a token is kept a day at most, whatever its endpoint says
REFRESH_MARGIN_SECONDS = 60  # a token is refreshed this long before it expires
LOCK_SECONDS = 15
WAIT_SECONDS = 10
FETCH_TIMEOUT = 10.0
POLL_SECONDS = 0.05
# After a failed fetch, sends that need the token fail at once for this long: 5 s, doubling per failure in a row, at
# most 5 minutes. A success forgets the failures.
FAILURE_BACKOFF_SECONDS = 5
FAILURE_BACKOFF_MAX_SECONDS = 300
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


@dataclass(frozen=True)
class Credentials:
    """What a send needs to obtain its token, taken from the subscription on the job's thread (no database on the
    event loop). The secret is not in its repr."""

    key: str
    token_url: str
    form: dict = field(repr=False)

    @classmethod
    def of(cls, subscription) -> "Credentials":
        form = {"grant_type": "client_credentials", "client_id": subscription.oauth_client_id,
                "client_secret": subscription.oauth_client_secret}
        if subscription.oauth_scope:
            form["scope"] = subscription.oauth_scope
        return cls(key=cache_key(subscription), token_url=subscription.oauth_token_url, form=form)

    async def bearer(self, post, *, stale: str | None = None, deadline: float | None = None) -> str:
        """The access token, on the transport's loop: this process's copy, else Redis's, else fetched (by one
        sender across all workers; the others wait for its result without holding a thread). `post` is the
        transport's (request, timeout) → SendResult; `stale`: a token the endpoint refused (a 401), never returned
        again; `deadline`: the monotonic time the send must be done by."""
        now = time.monotonic()
        deadline = min(deadline or now + WAIT_SECONDS, now + WAIT_SECONDS)
        local = _local.get(self.key)
        if local and local[1] > now and local[0] != stale:
            return local[0]
        _local.pop(self.key, None)
        while True:
            token = await self._shared(stale)
            if token is not None:
                return token
            if await _redis(_lock, self.key):
                try:  # another may have fetched between the look and the lock
                    return await self._shared(stale) or await self._fetch(post, deadline)
                finally:
                    await _redis(_unlock, self.key)
            if time.monotonic() + POLL_SECONDS > deadline:
                raise TokenError("another worker is still fetching the access token")
            await asyncio.sleep(POLL_SECONDS)

    async def _shared(self, stale: str | None) -> str | None:
        """The token in Redis unless it is `stale`; TokenError while a failed fetch is remembered."""
        cached, ttl, failure = await _redis(_read, self.key)
        if failure is not None:
            raise TokenError(failure)
        return _remember(self.key, cached, ttl) if cached is not None and cached != stale else None

    async def _fetch(self, post, deadline: float) -> str:
        timeout = max(0.1, min(FETCH_TIMEOUT, deadline - time.monotonic()))
        result = await post(OutgoingRequest(
            url=self.token_url, body=urlencode(self.form).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}), timeout)
        try:
            token, lifetime = parse(result)
        except TokenError as exc:
            backoff = await _redis(_failed, self.key, str(exc))
            raise TokenError(f"{exc}; not asked again for {backoff} s") from None
        keep = max(1, int(lifetime - REFRESH_MARGIN_SECONDS))
        await _redis(_store, self.key, token, keep)
        return _remember(self.key, token, keep)


def parse(result) -> tuple[str, float]:
    """(access token, seconds it lives) from the token endpoint's answer, or TokenError saying what was wrong."""
    if not result.ok:
        what = f"answered {result.status}" if result.status else f"failed: {result.error_detail}"
        raise TokenError(f"the token endpoint {what}")
    answer, problem = answers.json_value(result.body_excerpt)
    if not isinstance(answer, dict) or "access_token" not in answer:
        raise TokenError(f"the token endpoint's answer has no access_token{f' ({problem})' if problem else ''}")
    token = answer["access_token"]
    if not isinstance(token, str) or not token:
        raise TokenError("the token endpoint's access_token is empty")
    lifetime, problem = answers.finite_number(answer.get("expires_in", DEFAULT_LIFETIME), DEFAULT_LIFETIME)
    if problem:
        log.warning("the token endpoint's expires_in is %s; the token is kept %d s", problem, DEFAULT_LIFETIME)
    return token, min(max(0.0, lifetime), MAX_LIFETIME)


# Redis, from the event loop: each call runs on the loop's executor (a Redis that is away must not stall the loop).

async def _redis(call, *args):
    return await asyncio.get_running_loop().run_in_executor(None, call, *args)


def _connection():
    return redis_link.connection(AttemptQueue.DELIVERIES)


def _read(key: str) -> tuple[str | None, int, str | None]:
    with _connection().pipeline(transaction=False) as pipe:
        token, ttl, failure = pipe.get(key).ttl(key).get(key + ":failed").execute()
    return (token.decode() if token else None, ttl, failure.decode() if failure else None)


def _lock(key: str) -> bool:
    return bool(_connection().set(key + ":lock", "1", nx=True, ex=LOCK_SECONDS))


def _unlock(key: str) -> None:
    _connection().delete(key + ":lock")


def _store(key: str, token: str, keep: int) -> None:
    _connection().pipeline(transaction=False).set(key, token, ex=keep).delete(key + ":failures").execute()


def _failed(key: str, reason: str) -> int:
    """Remember a failed fetch: the next ones fail at once until the backoff runs out. Returns the backoff."""
    connection = _connection()
    failures = connection.incr(key + ":failures")
    backoff = min(FAILURE_BACKOFF_MAX_SECONDS, FAILURE_BACKOFF_SECONDS * 2 ** min(failures - 1, 16))
    connection.pipeline(transaction=False).expire(key + ":failures", FAILURE_BACKOFF_MAX_SECONDS * 2).set(
        key + ":failed", f"{reason} (a recent fetch failed; asked again after {backoff} s)", ex=backoff).execute()
    return backoff


def _remember(key: str, token: str, seconds: float) -> str:
    _local[key] = (token, time.monotonic() + max(0.0, float(seconds)))
    return token


def authorize(request: OutgoingRequest, subscription) -> OutgoingRequest:
    """The request with what the transport needs to obtain its bearer token (and renew it once after a 401)."""
    return replace(request, credentials=Credentials.of(subscription))


def bearer(subscription, *, transport=None) -> str:
    """The subscription's access token, waited for (tools and tests; sends obtain theirs on the loop)."""
    transport = transport or sender.transport()
    credentials = Credentials.of(subscription)
    return asyncio.run_coroutine_threadsafe(credentials.bearer(transport.post), transport.loop).result()

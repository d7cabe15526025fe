"""One request on the wire, and its answer as a value: the guard's last checks of the address, the egress proxy,
the deadline over all of it, the bounded read of the answer, an OAuth2 bearer token and its one renewal on a 401
(delivery/transport/sender.py keeps many of these in flight on its event loop). Never raises: a failure is a
`SendResult` with its error class (failures.py).
"""

import asyncio
import contextvars
import dataclasses
import functools
import socket
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
import yarl

from delivery.conf import herald
from delivery.rules.storable import clean_headers, clean_text
from delivery.rules.vocabulary import ErrorClass
from delivery.rules.wire import OutgoingRequest
from delivery.transport.failures import classify, status_class
from delivery.transport.lookups import Lookups
from delivery.transport.ssrf import (
    BlockedAddress,
    Unresolvable,
    checked,
    literal_address,
    literal_refusal,
    parse_networks,
)
from delivery.transport.tls import client_ssl_context

# Set while the transport opens a connection it has guarded: the one way out to an address a user chose. Nothing
# else in Herald connects to such an address; tests/fence.py fails any connection made without it (beside the
# process's own PostgreSQL and Redis).
GUARDED = contextvars.ContextVar("herald_guarded_connection", default=False)
EXCERPT_BYTES = 4096
DRAIN_LIMIT = 64 * 1024  # read this much at most so that the connection can be reused
MAX_FIELD_BYTES = 64 * 1024  # one response header line; a longer one makes the answer invalid
CONNECT_TIMEOUT_CAP = 10.0

@dataclass(frozen=True)
class SendResult:
    status: int | None
    duration_ms: int
    started_at: float = 0.0  # wall clock (time.time()) when the request began
    headers: dict[str, str] = field(default_factory=dict)
    body_excerpt: str = ""
    error_class: str = ""  # an ErrorClass, or "" for a 2xx
    error_detail: str = ""
    # What was sent when it is not the request submitted: a transformation's (transforms.py). None: that request.
    sent: OutgoingRequest | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def allowed_networks() -> tuple:
    return parse_networks(tuple(herald.ALLOWED_NETWORKS))


def egress_proxy() -> str:
    return herald.EGRESS_PROXY


def proxy_host() -> set[str]:
    """The egress proxy's host name: the one private destination the resolver lets through (connections to it)."""
    proxy = egress_proxy()
    return {urlsplit(proxy).hostname} if proxy else set()


async def pinned(url: str, lookups: Lookups) -> tuple[str, str]:
    """(the URL with its host replaced by the address the guard checked, the original host[:port] for Host/SNI)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = literal_address(host)
    if address is None:
        try:
            found = await lookups.addresses(host, port)
        except (socket.gaierror, UnicodeError) as exc:
            raise Unresolvable(f"{host} does not resolve: {exc}") from exc
        address = checked(host, found, allowed_networks())[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    return parts._replace(netloc=f"{literal}:{port}").geturl(), parts.netloc.rpartition("@")[2]


def pre_checked(url: str) -> None:
    """IP literals never reach the resolver: check them here (any spelling), as the HTTP client reads the host
    (yarl turns `①②⑦.0.0.1` and fullwidth digits into 127.0.0.1, then connects without asking the resolver)."""
    host = client_host(url)
    reason = literal_refusal(host, allowed_networks())
    if reason:
        raise BlockedAddress(f"{host}: {reason}")


@functools.lru_cache(maxsize=4096)
def client_host(url: str) -> str:
    """The host of `url` as aiohttp will connect to it (its URL library's reading), "" if there is none: the same
    for the same URL, so it is read once, not for every request to it."""
    try:
        return yarl.URL(url).host or ""
    except (ValueError, TypeError):
        return urlsplit(url).hostname or ""


async def post_authorized(session, lookups, request: OutgoingRequest, timeout: float) -> SendResult:
    """A request with OAuth2 credentials gets its bearer token here, inside its deadline and its endpoint's
    room; a 401 is sent once more with a renewed token, within the same deadline: one attempt either way."""
    if request.credentials is None:
        return await post(session, lookups, request, timeout)
    posting = functools.partial(post, session, lookups)  # what a token request is sent with
    began, deadline = time.time(), time.monotonic() + timeout
    try:
        token = await request.credentials.bearer(posting, deadline=deadline)
    except Exception as exc:
        return SendResult(status=None, duration_ms=int((timeout - (deadline - time.monotonic())) * 1000),
                          started_at=began, error_class=ErrorClass.TOKEN,
                          error_detail=clean_text(f"no access token: {exc}", 1024))
    result = await post(session, lookups, with_bearer(request, token), max(0.001, deadline - time.monotonic()))
    if result.status != 401:
        return result
    try:
        token = await request.credentials.bearer(posting, stale=token, deadline=deadline)
    except Exception as exc:
        return dataclasses.replace(result, error_detail=clean_text(
            f"401, and a new access token could not be obtained: {exc}", 1024))
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return result
    return await post(session, lookups, with_bearer(request, token), remaining)

async def post(session, lookups, request: OutgoingRequest, timeout: float) -> SendResult:
    """One POST on the loop, under `timeout` for all of it; never raises (a failure is a result)."""
    began, started = time.time(), time.monotonic()
    GUARDED.set(True)  # (this task's context: what it starts to connect inherits it)

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        async with asyncio.timeout(timeout):
            pre_checked(request.url)
            url, headers, extra = request.url, request.headers, {}
            proxy = egress_proxy()
            if proxy:
                url, netloc = await pinned(request.url, lookups)
                headers = {**request.headers, "Host": netloc}
                extra = {"proxy": proxy, "server_hostname": urlsplit(request.url).hostname}
            async with session.request(
                    request.method, url, data=request.body, headers=headers, allow_redirects=False,
                    ssl=client_ssl_context(request.client_certificate),
                    timeout=aiohttp.ClientTimeout(total=None, connect=min(timeout, CONNECT_TIMEOUT_CAP)),
                    **extra) as resp:
                excerpt = await read_excerpt(resp)
                status, headers = resp.status, clean_headers(resp.headers)
    except Exception as exc:  # the sender never raises: every failure becomes a result
        error_class, detail = classify(exc)
        if error_class == ErrorClass.TIMEOUT:
            detail = f"no complete answer within {timeout:g} s"
        return SendResult(status=None, duration_ms=elapsed(), started_at=began, error_class=error_class,
                          error_detail=clean_text(detail, 1024))
    # What the receiver sent is untrusted: bounded and made storable here, before anything else sees it.
    return SendResult(status=status, duration_ms=elapsed(), started_at=began, headers=headers,
                      body_excerpt=clean_text(excerpt), error_class=status_class(status))


def with_bearer(request: OutgoingRequest, token: str) -> OutgoingRequest:
    return dataclasses.replace(request, headers={**request.headers, "Authorization": f"Bearer {token}"})


async def read_excerpt(resp: aiohttp.ClientResponse) -> str:
    chunks, total = [], 0
    while total < DRAIN_LIMIT:
        chunk = await resp.content.read(8192)
        if not chunk:
            break
        if total < EXCERPT_BYTES:
            chunks.append(chunk)
        total += len(chunk)
    if total >= DRAIN_LIMIT and not resp.content.at_eof():
        resp.close()  # too long to drain; give up this connection rather than read it all
    return b"".join(chunks)[:EXCERPT_BYTES].decode("utf-8", errors="replace")



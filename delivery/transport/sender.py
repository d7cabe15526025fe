"""The HTTP sender: one POST, never a redirect, and a result value instead of an exception."""

import threading
import time
from dataclasses import dataclass, field

import requests
from django.conf import settings
from urllib3.exceptions import NameResolutionError

from delivery.rules.storable import clean_headers, clean_text
from delivery.rules.vocabulary import ErrorClass
from delivery.rules.wire import OutgoingRequest
from delivery.transport import deadlines
from delivery.transport.ssrf import BlockedAddress, GuardedAdapter, parse_networks

EXCERPT_BYTES = 4096
DRAIN_LIMIT = 64 * 1024  # read this much at most so that the connection can be reused
CONNECT_TIMEOUT_CAP = 10.0

_local = threading.local()


@dataclass(frozen=True)
class SendResult:
    status: int | None
    duration_ms: int
    started_at: float = 0.0  # wall clock (time.time()) when the request began
    headers: dict[str, str] = field(default_factory=dict)
    body_excerpt: str = ""
    error_class: str = ""  # an ErrorClass, or "" for a 2xx
    error_detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def session() -> requests.Session:
    """One keep-alive session per thread, reused across jobs (workers do not fork per job)."""
    current = getattr(_local, "session", None)
    if current is None:
        current = requests.Session()
        current.trust_env = False  # no proxies or .netrc from the worker's environment
        adapter = GuardedAdapter(allowed_networks, pool_connections=64, pool_maxsize=8, max_retries=0)
        current.mount("http://", adapter)
        current.mount("https://", adapter)
        _local.session = current
    return current


def allowed_networks() -> tuple:
    return parse_networks(tuple(settings.HERALD_ALLOWED_NETWORKS))


def classify_exception(exc: Exception) -> str:
    if isinstance(exc, BlockedAddress):
        return ErrorClass.BLOCKED_ADDRESS
    if isinstance(exc, requests.exceptions.Timeout):
        return ErrorClass.TIMEOUT
    if isinstance(exc, requests.exceptions.SSLError):
        return ErrorClass.TLS
    if isinstance(exc, requests.exceptions.ConnectionError):
        reason = exc.args[0] if exc.args else None
        inner = getattr(reason, "reason", reason)
        if isinstance(inner, NameResolutionError) or "NameResolutionError" in str(exc):
            return ErrorClass.DNS
        return ErrorClass.CONNECTION
    return ErrorClass.CONNECTION


def read_excerpt(response: requests.Response) -> str:
    chunks, total = [], 0
    for chunk in response.iter_content(chunk_size=8192):
        if total < EXCERPT_BYTES:
            chunks.append(chunk)
        total += len(chunk)
        if total >= DRAIN_LIMIT:
            response.close()  # too long to drain; give up this connection rather than read it all
            break
    return b"".join(chunks)[:EXCERPT_BYTES].decode("utf-8", errors="replace")


def send(request: OutgoingRequest, *, timeout: float) -> SendResult:
    began, started = time.time(), time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    with deadlines.deadline(timeout) as deadline_passed:
        try:
            response = session().post(
                request.url,
                data=request.body,
                headers=request.headers,
                timeout=(min(timeout, CONNECT_TIMEOUT_CAP), timeout),
                allow_redirects=False,
                stream=True,
            )
            with response:
                excerpt = read_excerpt(response)
        except Exception as exc:  # the sender never raises: every failure becomes a result
            if not deadline_passed():
                return SendResult(status=None, duration_ms=elapsed(), started_at=began,
                                  error_class=classify_exception(exc),
                                  error_detail=clean_text(f"{type(exc).__name__}: {exc}", 1024))
    if deadline_passed():
        # Cut off mid-answer: whatever was parsed (an EOF can even end the headers early) is not an answer.
        return SendResult(status=None, duration_ms=elapsed(), started_at=began, error_class=ErrorClass.TIMEOUT,
                          error_detail=f"no complete answer within {timeout:g} s")
    status = response.status_code
    if 200 <= status < 300:
        error_class = ""
    elif 300 <= status < 400:
        error_class = ErrorClass.REDIRECT
    else:
        error_class = ErrorClass.HTTP_STATUS
    # What the receiver sent is untrusted: bounded and made storable here, before anything else sees it.
    return SendResult(status=status, duration_ms=elapsed(), started_at=began, headers=clean_headers(response.headers),
                      body_excerpt=clean_text(excerpt), error_class=error_class)

"""What ended a send, in Herald's words: an error class (delivery/rules/vocabulary.py) and a short detail an
operator can act on. The sender never raises; it turns every failure into one of these."""

import ssl

import aiohttp

from delivery.rules.vocabulary import ErrorClass
from delivery.transport.ssrf import BlockedAddress, Unresolvable


def status_class(status: int) -> str:
    if 200 <= status < 300:
        return ""
    return ErrorClass.REDIRECT if 300 <= status < 400 else ErrorClass.HTTP_STATUS


def _chain(exc: BaseException):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or getattr(exc, "os_error", None) or exc.__context__


def classify(exc: BaseException) -> tuple[str, str]:
    """(error class, a short detail an operator can act on) for what ended a send."""
    for cause in _chain(exc):
        if isinstance(cause, BlockedAddress):
            return ErrorClass.BLOCKED_ADDRESS, str(cause)
        if isinstance(cause, Unresolvable):
            return ErrorClass.DNS, str(cause)
    if isinstance(exc, TimeoutError):
        return ErrorClass.TIMEOUT, "no complete answer in time"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ErrorClass.DNS, f"the host does not resolve: {exc.os_error}"
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
        return ErrorClass.TLS, f"TLS failed: {exc}"
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return ErrorClass.CONNECTION, f"the egress proxy refused the connection: {exc.status} {exc.message}"
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return ErrorClass.CONNECTION, f"could not connect to the egress proxy: {exc.os_error.strerror or exc}"
    if isinstance(exc, aiohttp.ClientResponseError):  # the parser refused the answer
        return ErrorClass.INVALID_RESPONSE, f"the answer is not valid HTTP: {exc.message}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ErrorClass.CONNECTION, f"could not connect to {exc.host}:{exc.port}: {exc.os_error.strerror or exc}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ErrorClass.CONNECTION, "the endpoint closed the connection before answering"
    return ErrorClass.CONNECTION, f"{type(exc).__name__}: {exc}"

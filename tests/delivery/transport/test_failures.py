"""What ended a send, in Herald's words (delivery/transport/failures.py): each kind of failure its error class and
a detail an operator can act on."""

import ssl

import aiohttp
import pytest

from delivery.transport.failures import classify, status_class
from delivery.transport.ssrf import BlockedAddress, Unresolvable


@pytest.mark.parametrize("status,expected", [(200, ""), (204, ""), (301, "redirect"), (404, "http_status"),
                                             (503, "http_status")])
def test_status_classes(status, expected):
    assert status_class(status) == expected


def connector_error(cls, os_error):
    key = aiohttp.client_reqrep.ConnectionKey("h", 443, True, None, None, None, None)
    return cls(key, os_error)


@pytest.mark.parametrize("exc,error_class,words", [
    (TimeoutError(), "timeout", "no complete answer in time"),
    (ssl.SSLError("bad certificate"), "tls", "TLS failed"),
    (aiohttp.ServerDisconnectedError(), "connection", "closed the connection"),
    (RuntimeError("odd"), "connection", "RuntimeError: odd"),
])
def test_each_failure_has_its_class(exc, error_class, words):
    found, detail = classify(exc)
    assert found == error_class and words in detail


def test_the_guard_and_dns_are_found_through_the_causes():
    wrapped = OSError("connect failed")
    wrapped.__cause__ = BlockedAddress("10.0.0.1 is a private address")
    assert classify(wrapped) == ("blocked_address", "10.0.0.1 is a private address")
    missing = OSError("resolve failed")
    missing.__context__ = Unresolvable("nowhere.invalid does not resolve")
    assert classify(missing)[0] == "dns"
    refused = connector_error(aiohttp.ClientConnectorError, ConnectionRefusedError(111, "Connection refused"))
    assert classify(refused) == ("connection", "could not connect to h:443: Connection refused")

"""One request on the wire (transport/posting.py): the host as the HTTP client reads it, the guard's check of an
address literal before any connection, the bearer header, an address pinned for the egress proxy, and the answer as
a value. (Many requests in flight, the deadline and the bounded read against real receivers:
tests/delivery/transport/test_sender.py.)"""

import asyncio

import pytest

from delivery.rules.wire import OutgoingRequest
from delivery.transport import posting
from delivery.transport.lookups import Lookups
from delivery.transport.ssrf import BlockedAddress


def test_the_host_is_read_as_the_http_client_reads_it():
    assert posting.client_host("http://①②⑦.0.0.1:8080/x") == "127.0.0.1"
    assert posting.client_host("https://Example.COM/a") == "example.com"
    assert posting.client_host("not a url") == ""


def test_an_address_literal_outside_the_allowed_networks_is_refused_in_any_spelling(settings):
    settings.HERALD_ALLOWED_NETWORKS = []
    for url in ("http://127.0.0.1/", "http://①②⑦.0.0.1/", "http://[::1]/", "http://0x7f.1/"):
        with pytest.raises(BlockedAddress):
            posting.pre_checked(url)
    posting.pre_checked("http://example.com/")  # a name: the resolver's to check, at connection time


def test_a_bearer_token_is_added_and_the_other_headers_kept():
    request = OutgoingRequest(url="https://example.com/hook", body=b"{}", headers={"Content-Type": "application/json"})
    sent = posting.with_bearer(request, "t0ken")
    assert sent.headers == {"Content-Type": "application/json", "Authorization": "Bearer t0ken"}
    assert request.headers == {"Content-Type": "application/json"}  # the request itself is not changed


def test_an_address_literal_is_pinned_with_its_port_and_the_host_kept_for_the_host_header(settings):
    settings.HERALD_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]
    lookups = Lookups(threads=1, timeout=1.0, cache_seconds=0)
    try:
        assert asyncio.run(posting.pinned("http://127.0.0.1:8080/a?b=1", lookups)) == (
            "http://127.0.0.1:8080/a?b=1", "127.0.0.1:8080")
        assert asyncio.run(posting.pinned("https://user@[::1]/x", lookups)) == ("https://[::1]:443/x", "[::1]")
    finally:
        lookups.close()


def test_only_a_2xx_is_ok():
    assert posting.SendResult(status=204, duration_ms=1).ok
    assert not posting.SendResult(status=300, duration_ms=1).ok
    assert not posting.SendResult(status=None, duration_ms=1, error_class="timeout").ok

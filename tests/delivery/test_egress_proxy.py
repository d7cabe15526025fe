"""Every delivery through HERALD_EGRESS_PROXY, addressed to the IP the guard checked: the proxy sees `CONNECT ip:port`
(HTTPS, SNI and the certificate check still on the name) or an absolute `http://ip:port/…` (HTTP, the name in
Host), never a name it could resolve to somewhere else; a blocked destination never reaches the proxy."""

import ipaddress

import pytest

from delivery.rules.wire import OutgoingRequest
from delivery.transport import sender, ssrf
from tests.conftest import drain, publish, subscribe
from tests.delivery.transport.test_ssrf import tls_receiver  # noqa: F401 (fixture)
from tests.proxy import Proxy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def proxy(settings):
    server = Proxy()
    settings.HERALD_EGRESS_PROXY = server.url
    yield server
    server.close()


@pytest.fixture
def hooks_test_is_local(monkeypatch):
    monkeypatch.setattr(ssrf, "resolve", lambda host, port: [ipaddress.ip_address("127.0.0.1")])


def test_http_goes_to_the_checked_address_through_the_proxy(proxy, receiver, hooks_test_is_local):
    port = receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"http://hooks.test:{port}/hook?a=1", body=b"{}"), timeout=5)
    assert result.status == 200, result
    assert proxy.targets == [f"POST http://127.0.0.1:{port}/hook?a=1"]
    assert receiver.requests[0].headers["host"] == f"hooks.test:{port}" and receiver.requests[0].path == "/hook?a=1"


def test_https_tunnels_to_the_checked_address_and_keeps_the_certificate_check(proxy, tls_receiver):  # noqa: F811
    port = tls_receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"https://hooks.test:{port}/hook", body=b"{}"), timeout=5)
    assert result.status == 200, result
    assert proxy.targets == [f"CONNECT 127.0.0.1:{port}"]
    assert tls_receiver.requests[0].headers["host"] == f"hooks.test:{port}"
    wrong_name = sender.send(OutgoingRequest(url=f"https://other.test:{port}/hook", body=b"{}"), timeout=5)
    assert wrong_name.error_class == "tls"  # the certificate is still checked against the name


def test_a_blocked_destination_never_reaches_the_proxy(proxy, monkeypatch):
    monkeypatch.setattr(ssrf, "resolve", lambda host, port: [ipaddress.ip_address("10.0.0.7")])
    result = sender.send(OutgoingRequest(url="http://rebinding.test/hook", body=b"{}"), timeout=5)
    assert result.error_class == "blocked_address"
    literal = sender.send(OutgoingRequest(url="http://169.254.169.254/latest", body=b"{}"), timeout=5)
    assert literal.error_class == "blocked_address"
    assert proxy.targets == []


def test_a_proxy_refusing_a_tunnel_is_a_connection_failure(proxy, tls_receiver):  # noqa: F811
    proxy.refuse = True
    port = tls_receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"https://hooks.test:{port}/hook", body=b"{}"), timeout=5)
    assert result.error_class == "connection"
    assert result.error_detail == "the egress proxy refused the connection: 403 Forbidden"
    assert tls_receiver.requests == []


def test_a_dead_proxy_is_a_connection_failure_naming_it(settings, receiver, hooks_test_is_local):
    settings.HERALD_EGRESS_PROXY = "http://127.0.0.1:9"  # nothing listens there
    port = receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"http://hooks.test:{port}/hook", body=b"{}"), timeout=5)
    assert result.error_class == "connection" and result.error_detail.startswith("could not connect to the egress")
    assert receiver.requests == []


def test_deliveries_through_a_worker_leave_by_the_proxy(proxy, api, receiver, redis_conn):
    topic, _ = subscribe(api, receiver)
    publish(api, topic, {"n": 1})
    drain()
    assert receiver.wait_for(1)[0].json()["data"] == {"n": 1}
    port = receiver.server.server_address[1]
    assert proxy.targets == [f"POST http://127.0.0.1:{port}/hook"]

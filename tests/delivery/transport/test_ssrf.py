"""The private-address guard: what is refused, the allow-list, and connecting to the checked address."""

import ipaddress
import ssl

import pytest
import trustme

from delivery.rules.wire import OutgoingRequest
from delivery.transport import sender, ssrf
from tests.receiver import Receiver, Reply

NONE_ALLOWED: tuple = ()


@pytest.mark.parametrize("host", [
    "127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.0.0.1",  # loopback spellings
    "10.0.0.1", "172.16.5.4", "192.168.1.1",  # private
    "169.254.169.254", "169.254.0.1",  # link-local / cloud metadata
    "100.64.0.1", "100.100.100.200",  # shared address space
    "0.0.0.0", "224.0.0.1", "240.0.0.1", "255.255.255.255",  # unspecified, multicast, reserved, broadcast
    "::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1",  # IPv6 equivalents, AWS IPv6 metadata
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",  # IPv4-mapped IPv6
    "64:ff9b::a00:1", "2002:7f00:1::",  # NAT64 and 6to4 embedding private IPv4
])
def test_refused_addresses(host):
    address = ssrf.literal_address(host)
    assert address is not None, host
    assert ssrf.blocked_reason(address, NONE_ALLOWED) is not None, host


@pytest.mark.parametrize("host", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "1.1.1.1"])
def test_public_addresses_pass(host):
    assert ssrf.blocked_reason(ssrf.literal_address(host), NONE_ALLOWED) is None


def test_allowed_networks_exempt_exactly_their_ranges():
    allowed = ssrf.parse_networks(("127.0.0.0/8", "10.1.0.0/16"))
    assert ssrf.blocked_reason(ipaddress.ip_address("127.0.0.1"), allowed) is None
    assert ssrf.blocked_reason(ipaddress.ip_address("::ffff:127.0.0.1"), allowed) is None
    assert ssrf.blocked_reason(ipaddress.ip_address("10.1.2.3"), allowed) is None
    assert ssrf.blocked_reason(ipaddress.ip_address("10.2.0.1"), allowed) is not None
    assert ssrf.blocked_reason(ipaddress.ip_address("169.254.169.254"), allowed) is not None


def test_names_are_read_as_ip_only_when_they_are_ip_spellings():
    assert ssrf.literal_address("example.com") is None
    assert ssrf.literal_address("deadbeef.example") is None
    assert str(ssrf.literal_address("[::1]")) == "::1"


def test_a_blocked_send_is_an_attempt_result_not_an_exception(receiver, settings):
    settings.HERALD_ALLOWED_NETWORKS = []
    result = sender.send(OutgoingRequest(url=receiver.url, body=b"{}"), timeout=2)
    assert (result.status, result.error_class) == (None, "blocked_address")
    assert "loopback" in result.error_detail
    assert receiver.requests == []


def test_localhost_name_is_refused_after_resolution(receiver, settings):
    settings.HERALD_ALLOWED_NETWORKS = []
    port = receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"http://localhost:{port}/hook", body=b"{}"), timeout=2)
    assert result.error_class == "blocked_address"
    assert receiver.requests == []


def test_the_connection_goes_to_the_checked_address_with_the_original_host(receiver, monkeypatch):
    """No rebinding window: the name is resolved once by the guard and the socket connects to that address."""
    lookups = []

    def resolve_once(host, port):
        lookups.append(host)
        return [ipaddress.ip_address("127.0.0.1")]

    monkeypatch.setattr(ssrf, "resolve", resolve_once)
    port = receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"http://hooks.invalid:{port}/hook", body=b"{}"), timeout=2)

    assert result.status == 200, result
    assert lookups == ["hooks.invalid"]
    [request] = receiver.requests
    assert request.headers["host"] == f"hooks.invalid:{port}"


def test_redirects_to_private_addresses_are_never_followed(receiver):
    receiver.script = [Reply(status=307, headers={"Location": "http://169.254.169.254/latest/meta-data/"})]
    result = sender.send(OutgoingRequest(url=receiver.url, body=b"{}"), timeout=2)
    assert (result.status, result.error_class) == (307, "redirect")
    assert len(receiver.requests) == 1


def tls_server(ca, tmp_path, monkeypatch, settings, *, require_client_certificate: bool = False) -> Receiver:
    """An HTTPS receiver for `hooks.test` on 127.0.0.1 with a certificate from `ca`, which the sender is told to
    trust; with `require_client_certificate`, it refuses clients without a certificate from `ca` (mTLS)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.test").configure_cert(context)
    if require_client_certificate:
        context.verify_mode = ssl.CERT_REQUIRED
        ca.configure_trust(context)
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    settings.HERALD_CA_BUNDLE = str(bundle)
    monkeypatch.setattr(ssrf, "resolve", lambda host, port: [ipaddress.ip_address("127.0.0.1")])
    return Receiver(ssl_context=context)


@pytest.fixture
def tls_receiver(tmp_path, monkeypatch, settings):
    server = tls_server(trustme.CA(), tmp_path, monkeypatch, settings)
    yield server
    server.close()


def test_https_to_the_checked_address_keeps_sni_and_the_certificate_check(tls_receiver):
    port = tls_receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"https://hooks.test:{port}/hook", body=b"{}"), timeout=5)
    assert result.status == 200, result
    assert tls_receiver.requests[0].headers["host"] == f"hooks.test:{port}"


def test_https_certificate_for_another_name_is_a_tls_error(tls_receiver):
    port = tls_receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"https://other.test:{port}/hook", body=b"{}"), timeout=5)
    assert (result.status, result.error_class) == (None, "tls")
    assert tls_receiver.requests == []


@pytest.mark.parametrize("host", ["①②⑦.0.0.1", "１２７.０.０.１", "127。0。0。1", "127.0.0.①"])
def test_an_address_spelled_in_other_digits_or_dots_is_the_address_it_means(receiver, settings, host):
    """The HTTP client reads these as 127.0.0.1 and connects without a lookup: the guard reads them the same."""
    settings.HERALD_ALLOWED_NETWORKS = []
    port = receiver.server.server_address[1]
    result = sender.send(OutgoingRequest(url=f"http://{host}:{port}/hook", body=b"{}"), timeout=2)
    assert result.error_class == "blocked_address"
    assert receiver.requests == []

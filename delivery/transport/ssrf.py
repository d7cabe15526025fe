"""The private-address guard: webhooks go to the public internet only, unless HERALD_ALLOWED_NETWORKS says so.

Refused: loopback, private, link-local (cloud metadata included), multicast, unspecified, reserved, shared
(100.64.0.0/10) and the translation/relay ranges that can reach them, in IPv4 and IPv6, IPv4-mapped IPv6 included.
Legacy IPv4 spellings (decimal, octal, hex, short forms) are read as the address they mean.

At send time the host is resolved once, the address is checked, and the connection goes to that very address
(the Host header, TLS SNI and certificate check keep the name), so DNS rebinding has no window. This follows the
approach of requests-hardened; Herald needs CIDR allow-lists, which that library does not offer.
"""

import ipaddress
import socket
from functools import lru_cache

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict

from delivery.transport.deadlines import POOL_CLASSES

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
EXTRA_BLOCKED = tuple(ipaddress.ip_network(cidr) for cidr in (
    "100.64.0.0/10",  # shared address space (carrier-grade NAT); also Alibaba's metadata service
    "192.0.0.0/24",  # IETF protocol assignments
    "192.88.99.0/24",  # 6to4 relay anycast
    "198.18.0.0/15",  # benchmarking
    "64:ff9b::/96", "64:ff9b:1::/48",  # NAT64: can translate to private IPv4
    "2002::/16",  # 6to4: embeds IPv4
    "2001::/32",  # Teredo
    "5f00::/16", "2001:20::/28", "3fff::/20",
))


class BlockedAddress(requests.exceptions.ConnectionError):
    """The destination is an address webhooks may not reach."""


@lru_cache(maxsize=32)
def parse_networks(cidrs: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs if cidr.strip())


def literal_address(host: str) -> Address | None:
    """The address a URL host means if it is an IP literal in any spelling (e.g. 2130706433, 0x7f.1), else None."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def blocked_reason(address: Address, allowed: tuple = ()) -> str | None:
    """Why `address` may not receive webhooks, or None if it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allowed):
        return None
    for reason, hit in (
        ("loopback", address.is_loopback), ("unspecified", address.is_unspecified),
        ("link-local (includes cloud metadata)", address.is_link_local), ("multicast", address.is_multicast),
        ("private", address.is_private), ("reserved", address.is_reserved),
        ("shared or translation range", any(address in network for network in EXTRA_BLOCKED)),
    ):
        if hit:
            return f"{address} is a {reason} address"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def resolve(host: str, port: int) -> list[Address]:
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(info[4][0]) for info in infos]


def checked_address(host: str, port: int, allowed: tuple) -> Address:
    """Resolve once; every address must be allowed (a name may not mix public and private answers)."""
    try:
        addresses = resolve(host, port)
    except socket.gaierror as exc:
        raise requests.exceptions.ConnectionError(f"NameResolutionError: {host}: {exc}") from exc
    for address in addresses:
        reason = blocked_reason(address, allowed)
        if reason:
            raise BlockedAddress(f"{host} resolves to {reason}")
    return addresses[0]


class GuardedAdapter(HTTPAdapter):
    """Connects to the checked address of the URL's host and never anywhere else."""

    def __init__(self, allowed_networks, **kwargs):
        self.allowed_networks = allowed_networks  # a callable returning parsed networks, read per request
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(POOL_CLASSES)  # connections the deadline watchdog can cut

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        hostname, port = host_params["host"], host_params["port"]
        request.headers = CaseInsensitiveDict(request.headers or {})
        host_header = f"[{hostname}]" if ":" in hostname else hostname
        default_port = 443 if host_params["scheme"] == "https" else 80
        request.headers["Host"] = host_header if port in (None, default_port) else f"{host_header}:{port}"
        if host_params["scheme"] == "https":
            pool_kwargs["assert_hostname"] = hostname
            pool_kwargs["server_hostname"] = hostname
        address = checked_address(hostname, port or default_port, self.allowed_networks())
        host_params["host"] = str(address)
        return host_params, pool_kwargs


def subscribe_time_refusal(host: str, port: int, allowed: tuple) -> str | None:
    """Why a URL may not be subscribed, checked on what the host means now; None if it may.

    IP literals (in any spelling) are checked strictly. Names are checked when they resolve; a name that does not
    resolve yet is accepted, because every send checks again after resolving.
    """
    try:
        addresses = resolve(host, port)
    except (socket.gaierror, UnicodeError):
        return None
    for address in addresses:
        reason = blocked_reason(address, allowed)
        if reason:
            return f"webhooks may not be sent there: {reason}"
    return None

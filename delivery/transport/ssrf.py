"""The private-address guard: webhooks go to the public internet only, unless HERALD_ALLOWED_NETWORKS says so.

Refused: loopback, private, link-local (cloud metadata included), multicast, unspecified, reserved, shared
(100.64.0.0/10) and the translation/relay ranges that can reach them, in IPv4 and IPv6, IPv4-mapped IPv6 included.
Legacy IPv4 spellings (decimal, octal, hex, short forms) are read as the address they mean.

At send time the host is resolved once, every address is checked, and the connection goes to a checked address
(the Host header, TLS SNI and certificate check keep the name), so DNS rebinding has no window: the sender's HTTP
client asks `GuardedResolver` for addresses and connects only to what it returns. A kept-alive connection was
checked when it was opened.
"""

import ipaddress
import socket
from functools import lru_cache

from aiohttp.abc import AbstractResolver

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


class BlockedAddress(OSError):
    """The destination is an address webhooks may not reach."""


class Unresolvable(OSError):
    """The host name does not resolve."""


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


@lru_cache(maxsize=4096)
def literal_refusal(host: str, allowed: tuple) -> str | None:
    """Why a URL host that is an IP literal may not be sent to (None if it may, or is a name): the same answer for
    the same host and allowed networks, so it is worked out once, not for every request to it."""
    address = literal_address(host)
    return blocked_reason(address, allowed) if address is not None else None


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


def checked(host: str, addresses: list[Address], allowed: tuple) -> list[Address]:
    """Every address a name resolved to must be allowed (a name may not mix public and private answers)."""
    for address in addresses:
        reason = blocked_reason(address, allowed)
        if reason:
            raise BlockedAddress(f"{host} resolves to {reason}")
    return addresses


def checked_addresses(host: str, port: int, allowed: tuple) -> list[Address]:
    """Resolve once, here and now (blocking: tools only; the transport resolves through its `lookups.Lookups`)."""
    try:
        addresses = resolve(host, port)
    except (socket.gaierror, UnicodeError) as exc:
        raise Unresolvable(f"{host} does not resolve: {exc}") from exc
    return checked(host, addresses, allowed)


class GuardedResolver(AbstractResolver):
    """The HTTP client's resolver: the addresses it may connect to, checked. `allowed` returns the parsed
    allow-list; it is read for every new connection, so a settings change applies without a restart. `lookup` is
    the transport's (async: its own threads, in shares, under a deadline)."""

    def __init__(self, allowed, lookup, exempt=lambda: set()):
        self.allowed = allowed
        self.lookup = lookup
        self.exempt = exempt  # host names not checked: the egress proxy's, which the operator chose

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list:
        literal = literal_address(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = await self.lookup(host, port)
            except (socket.gaierror, UnicodeError) as exc:
                raise Unresolvable(f"{host} does not resolve: {exc}") from exc
        if host not in self.exempt():
            checked(host, addresses, self.allowed())
        return [{"hostname": host, "host": str(address), "port": port,
                 "family": socket.AF_INET6 if address.version == 6 else socket.AF_INET, "proto": 0,
                 "flags": socket.AI_NUMERICHOST} for address in dict.fromkeys(addresses)]

    async def close(self) -> None:
        return None


# Names that mean this machine whatever DNS says (RFC 6761, section 6.3): refused at subscribe time without a lookup.
LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def subscribe_time_refusal(host: str, port: int, allowed: tuple) -> str | None:
    """Why a URL may not be subscribed, from what its host says by itself; None if it may.

    IP literals (in any spelling) are checked strictly, and so are the names that always mean this machine
    (`localhost`, `*.localhost`). Other names are not looked up here: a lookup inside a web request would let a
    tenant's slow name server hold a web worker that every owner shares, and the send-time check, after every
    lookup, is the one that counts.
    """
    name = host.lower().rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        address = ipaddress.ip_address("127.0.0.1")
    else:
        address = literal_address(host)
        if address is None:
            return None
    reason = blocked_reason(address, allowed)
    if reason:
        return (f"webhooks may not be sent there: {reason}. An operator can allow such a network with "
                f"HERALD_ALLOWED_NETWORKS (e.g. 127.0.0.0/8 for receivers on this machine in development).")
    return None

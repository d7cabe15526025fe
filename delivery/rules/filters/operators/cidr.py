"""An IPv4 or IPv6 address within a network (pure; no Django)."""

import bisect
import ipaddress
from functools import lru_cache

from delivery.rules.filters.operators.base import Operator
from delivery.rules.filters.values import address


@lru_cache(maxsize=1024)
def network(text: str):
    return ipaddress.ip_network(text, strict=False)


class Cidr(Operator):
    """{"cidr": "10.0.0.0/24"}: an IPv4 or IPv6 address string within the network ("IP address matching")."""

    name = "cidr"

    def problem(self, argument):
        try:
            if not isinstance(argument, str):  # ipaddress reads an integer as an address: 5 is 0.0.0.5/32
                raise TypeError(argument)
            network(argument)
        except (TypeError, ValueError):
            return "must be an IP network such as \"10.0.0.0/24\""
        return None

    def one(self, argument, value):
        parsed = address(value)
        return parsed is not None and parsed in network(argument)

    def any_in(self, argument, index):
        net = network(argument)
        numbers = index.addresses[net.version]
        at = bisect.bisect_left(numbers, int(net.network_address))
        return at < len(numbers) and numbers[at] <= int(net.broadcast_address)

"""Leaf values: what a policy's conditions are compared with (pure; no Django).

A *leaf value* is a string, a number, `true`/`false` or `null` (objects are not leaves; an array's elements, at any
depth, are each a leaf). `value_kind` says which; `identity` is how exact values compare (numbers by value to five
digits after the decimal point, as Amazon SNS compares them; `true` never equals `1`). Adding a value type is
`value_kind`, `identity`, `index.Index` and the operators that take it.
"""

import ipaddress
import math
import re
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

NUMERIC_LIMIT = 1e9  # SNS: numbers in a policy lie within ±10^9 ("Filter policy constraints")
PRECISION = 5        # SNS: "five digits of accuracy after the decimal point"
SCALE = 10 ** PRECISION


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite(value) -> bool:
    """A number that is not inf or nan (an int of any size is; math.isfinite would overflow on a huge one)."""
    return is_number(value) and (isinstance(value, int) or math.isfinite(value))


def value_kind(value) -> str | None:
    """"string", "number", "boolean", "null", or None for what is not a leaf (an object, an array)."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number" if finite(value) else None
    if value is None:
        return "null"
    return None


@lru_cache(maxsize=65_536)
def scaled(number) -> int:
    """A number as SNS compares it: to five digits after the decimal point (100.123456789 is 100.1234567), rounded
    half up on its decimal text, so 0.000025 is 0.00003 however binary floating point holds it."""
    if isinstance(number, int):
        return number * SCALE
    return int(Decimal(repr(number)).scaleb(PRECISION).to_integral_value(ROUND_HALF_UP))


def identity(value):
    """What an exact condition and a leaf value are equal by: the kind and the value (numbers scaled)."""
    kind = value_kind(value)
    return (kind, scaled(value)) if kind == "number" else (kind, value)


def number_problem(value) -> str | None:
    if not finite(value) or abs(value) > NUMERIC_LIMIT:
        return "must be a number between -1e9 and 1e9"
    return None


def has_value(values: list) -> bool:
    """A key exists when it has a value other than null ("Key matching")."""
    return any(value is not None for value in values)


_ADDRESS_LIKE = re.compile(r"[0-9A-Fa-f:.]{2,45}\Z")


def address(value):
    """A string value as an IPv4 or IPv6 address, or None."""
    if not isinstance(value, str) or not _ADDRESS_LIKE.match(value):  # an exception per non-address costs
        return None
    return _parsed_address(value)


@lru_cache(maxsize=65_536)
def _parsed_address(text: str):
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None

"""What one key of a filter policy may hold: its value types and its operators, each in one place (pure; no Django).

A *leaf value* is what a policy's conditions are compared with: a string, a number, `true`/`false` or `null`
(objects are not leaves; an array's elements, at any depth, are each a leaf). `value_kind` says which; `identity`
is how exact values compare (numbers by value to five digits after the decimal point, as Amazon SNS compares them;
`true` never equals `1`).

An operator is a class: `problem` says what is wrong with its argument (the caller names where), `one` is its
meaning for one argument and one value, written plainly, and `compile` is the same meaning for all of a key's
conditions of this operator at once, in about constant time per value whatever their number (a test compares the
two over every pair and triple of a pool of conditions). Adding an operator is adding a class to OPERATORS; adding a
value type is `value_kind`, `identity` and the operators that take it.

SNS's documentation pages each operator comes from are named on its class (docs/filtering.md has the table).
"""

import bisect
import ipaddress
import math
import operator
import re
from functools import lru_cache

NUMERIC_LIMIT = 1e9  # SNS: numbers in a policy lie within ±10^9 ("Filter policy constraints")
PRECISION = 5        # SNS: "five digits of accuracy after the decimal point"
SCALE = 10 ** PRECISION


# --- value types ----------------------------------------------------------------------------------------------------

def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def value_kind(value) -> str | None:
    """"string", "number", "boolean", "null", or None for what is not a leaf (an object, an array)."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number" if math.isfinite(value) else None
    if value is None:
        return "null"
    return None


def scaled(number) -> int:
    """A number as SNS compares it: to five digits after the decimal point (100.123456789 is 100.1234567)."""
    return round(number * SCALE)


def identity(value):
    """What an exact condition and a leaf value are equal by: the kind and the value (numbers scaled)."""
    kind = value_kind(value)
    return (kind, scaled(value)) if kind == "number" else (kind, value)


def number_problem(value) -> str | None:
    if not is_number(value) or not math.isfinite(value) or abs(value) > NUMERIC_LIMIT:
        return "must be a number between -1e9 and 1e9"
    return None


def exact_problem(value) -> str | None:
    """An exact condition: a string, a number within ±1e9, true, false or null ("Filter policy constraints": the
    JSON may hold strings, numbers and the keywords true, false and null)."""
    if is_number(value):
        return number_problem(value)
    if value_kind(value) is None:
        return "must be a string, a number, true, false, null or an operator object such as {\"prefix\": \"a\"}"
    return None


# --- operators ------------------------------------------------------------------------------------------------------

class Operator:
    """One operator; subclasses set `name` and define `problem`, `one` and (for speed) `compile`."""

    name = ""
    presence = False  # decides on whether the key has a value at all (exists), not on the values

    def problem(self, argument) -> str | None:
        raise NotImplementedError

    def one(self, argument, value) -> bool:
        """Does this operator with `argument` hold for one leaf value?"""
        raise NotImplementedError

    def compile(self, arguments: list):
        """A test of one leaf value that holds when `one` holds for any of `arguments`."""
        return lambda value: any(self.one(argument, value) for argument in arguments)


def _non_empty_string(argument) -> str | None:
    return None if isinstance(argument, str) and argument else "must be a non-empty string"


class Exact(Operator):
    """A plain value: equal to it ("String value matching", "Numeric value matching": exact)."""

    name = "(exact)"

    def problem(self, argument):
        return exact_problem(argument)

    def one(self, argument, value):
        return identity(argument) == identity(value)

    def compile(self, arguments):
        wanted = {identity(argument) for argument in arguments}
        return lambda value: identity(value) in wanted


class Prefix(Operator):
    """{"prefix": "eu-"} ("String value matching": prefix)."""

    name = "prefix"
    problem = staticmethod(_non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.startswith(argument)

    def compile(self, arguments):
        prefixes = tuple(arguments)
        return lambda value: isinstance(value, str) and value.startswith(prefixes)


class Suffix(Operator):
    """{"suffix": ".png"} ("String value matching": suffix)."""

    name = "suffix"
    problem = staticmethod(_non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.endswith(argument)

    def compile(self, arguments):
        suffixes = tuple(arguments)
        return lambda value: isinstance(value, str) and value.endswith(suffixes)


class EqualsIgnoreCase(Operator):
    """{"equals-ignore-case": "RUGBY"} ("String value matching": equals-ignore-case)."""

    name = "equals-ignore-case"
    problem = staticmethod(_non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.casefold() == argument.casefold()

    def compile(self, arguments):
        folded = {argument.casefold() for argument in arguments}
        return lambda value: isinstance(value, str) and value.casefold() in folded


class Exists(Operator):
    """{"exists": true|false}: the key has a value, or has none ("Key matching"). Only leaves exist (an object, an
    empty array are none), and a null is no value."""

    name = "exists"
    presence = True

    def problem(self, argument):
        return None if isinstance(argument, bool) else "must be true or false"

    def one(self, argument, value):  # asked with the key's presence as the value
        return value is argument

    def compile(self, arguments):
        wanted = set(arguments)
        return lambda present: present in wanted


NUMERIC_OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class Numeric(Operator):
    """{"numeric": ["=", 5]} or a range [">", 0, "<=", 150] ("Numeric value matching"); numbers compare to five
    digits after the decimal point."""

    name = "numeric"
    EXAMPLE = "such as [\"=\", 5] or [\">\", 0, \"<=\", 150]"

    def problem(self, terms):
        if not isinstance(terms, list) or len(terms) not in (2, 4):
            return f"must be one or two comparisons, {self.EXAMPLE}"
        pairs = [(terms[i], terms[i + 1]) for i in range(0, len(terms), 2)]
        for n, (op, value) in enumerate(pairs):
            if not isinstance(op, str) or op not in NUMERIC_OPS:
                return f"[{2 * n}]: unknown operator {str(op)[:20]!r}; use one of {', '.join(NUMERIC_OPS)}"
            problem = number_problem(value)
            if problem:
                return f"[{2 * n + 1}]: {problem}"
        if len(pairs) == 2:
            (low_op, low), (high_op, high) = pairs
            if low_op not in (">", ">=") or high_op not in ("<", "<="):
                return "a range is a lower bound (> or >=) then an upper bound (< or <=)"
            if scaled(low) >= scaled(high):
                return f"the lower bound {low} is not below the upper bound {high}"
        return None

    def one(self, terms, value):
        return is_number(value) and math.isfinite(value) and all(
            NUMERIC_OPS[terms[i]](scaled(value), scaled(terms[i + 1])) for i in range(0, len(terms), 2))

    def compile(self, arguments):
        """The ranges' bounds, sorted, and whether any range holds each segment they cut the line into (below the
        first bound, each bound, between bounds, above the last): within a segment the answer is the same, so a
        value costs one binary search."""
        bounds = sorted({scaled(term) for terms in arguments for term in terms[1::2]})
        points = [bounds[0] - 1]
        for low, high in zip(bounds, bounds[1:], strict=False):
            points += [low, (low + high) / 2]
        points += [bounds[-1], bounds[-1] + 1]
        covered = [any(all(NUMERIC_OPS[terms[i]](point, scaled(terms[i + 1])) for i in range(0, len(terms), 2))
                       for terms in arguments) for point in points]

        def test(value):
            if not is_number(value) or not math.isfinite(value):
                return False
            at = scaled(value)
            index = bisect.bisect_left(bounds, at)
            if index < len(bounds) and bounds[index] == at:
                return covered[2 * index + 1]
            return covered[2 * index]
        return test


@lru_cache(maxsize=1024)
def network(text: str):
    return ipaddress.ip_network(text, strict=False)


_ADDRESS_LIKE = re.compile(r"[0-9A-Fa-f:.]{2,45}\Z")


def _address(value):
    if not isinstance(value, str) or not _ADDRESS_LIKE.match(value):  # an exception per non-address costs
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


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
        address = _address(value)
        return address is not None and address in network(argument)

    def compile(self, arguments):
        networks: dict[tuple[int, int], set[int]] = {}  # by (version, prefix length): the networks' prefixes
        for argument in arguments:
            net = network(argument)
            networks.setdefault((net.version, net.prefixlen), set()).add(
                int(net.network_address) >> (net.max_prefixlen - net.prefixlen))

        def test(value):
            address = _address(value)
            if address is None:
                return False
            number, bits = int(address), address.max_prefixlen
            return any(number >> (bits - length) in prefixes
                       for (version, length), prefixes in networks.items() if version == address.version)
        return test


class AnythingBut(Operator):
    """{"anything-but": v}: v a string, a number, a list of strings or of numbers, or {"prefix": "x"} /
    {"suffix": "x"} ("String value matching" and "Numeric value matching": anything-but). A value passes unless it
    is one of them (or has the prefix, the suffix); `null` passes none (SNS: anything-but does not match a missing
    or null value)."""

    name = "anything-but"
    AFFIXES = {"prefix": str.startswith, "suffix": str.endswith}

    def problem(self, argument):
        if isinstance(argument, dict):
            if len(argument) != 1 or next(iter(argument)) not in self.AFFIXES:
                return "as an object it takes {\"prefix\": ...} or {\"suffix\": ...}"
            (kind, value), = argument.items()
            problem = _non_empty_string(value)
            return f".{kind}: {problem}" if problem else None
        values = argument if isinstance(argument, list) else [argument]
        if not values:
            return "must not be an empty list"
        for n, value in enumerate(values):
            problem = "must be a string or a number" if not (isinstance(value, str) or is_number(value)) else (
                number_problem(value) if is_number(value) else None)
            if problem:
                return f"[{n}]: {problem}" if isinstance(argument, list) else problem
        return None

    def one(self, argument, value):
        if value is None:
            return False
        if isinstance(argument, dict):
            (kind, affix), = argument.items()
            return not (isinstance(value, str) and self.AFFIXES[kind](value, affix))
        excluded = argument if isinstance(argument, list) else [argument]
        return identity(value) not in {identity(item) for item in excluded}

    def compile(self, arguments):
        listed = [a if isinstance(a, list) else [a] for a in arguments if not isinstance(a, dict)]
        # A value passes one list unless it is in it: it passes some list unless it is in every one of them.
        in_all = set.intersection(*[{identity(item) for item in x} for x in listed]) if listed else None
        affixed = {kind: [a[kind] for a in arguments if isinstance(a, dict) and kind in a] for kind in self.AFFIXES}
        having_all = {kind: self._all_of(affixes, self.AFFIXES[kind]) for kind, affixes in affixed.items()}

        def test(value):
            if value is None:
                return False
            if in_all is not None and identity(value) not in in_all:
                return True
            for kind, must in having_all.items():
                if must is None:
                    continue
                if must is False or not isinstance(value, str) or not self.AFFIXES[kind](value, must):
                    return True
            return False
        return test

    @staticmethod
    def _all_of(affixes: list[str], has):
        """A value passes one of several `anything-but` prefixes (suffixes) unless it has every one. None: no such
        condition; False: no value can have them all; else the affix that having all of them comes down to."""
        if not affixes:
            return None
        longest = max(affixes, key=len)
        return longest if all(has(longest, affix) for affix in affixes) else False


EXACT = Exact()
OPERATORS = {op.name: op for op in (Prefix(), Suffix(), EqualsIgnoreCase(), Exists(), Numeric(), Cidr(),
                                     AnythingBut())}


def operator_of(condition) -> tuple[Operator, object]:
    """(operator, argument) of a condition already checked: a plain value is EXACT."""
    if isinstance(condition, dict):
        (name, argument), = condition.items()
        return OPERATORS[name], argument
    return EXACT, condition


def condition_problem(condition) -> str | None:
    """What is wrong with one condition, or None."""
    if not isinstance(condition, dict):
        return EXACT.problem(condition)
    if len(condition) != 1 or next(iter(condition)) not in OPERATORS:
        return f"unknown operator {str(condition)[:100]}; known: {', '.join(OPERATORS)}"
    (name, argument), = condition.items()
    problem = OPERATORS[name].problem(argument)
    if problem is None:
        return None
    return f".{name}{problem}" if problem.startswith((".", "[")) else f".{name}: {problem}"


class Conditions:
    """One key's conditions, compiled: each operator's conditions as one test, so a value costs one check per
    operator whatever the number of conditions (an array of 28,000 elements against 150 conditions, what the limits
    allow, was 150 × 28,000 checks: 2-28 s per publish)."""

    def __init__(self, conditions: list):
        grouped: dict[Operator, list] = {}
        for condition in conditions:
            op, argument = operator_of(condition)
            grouped.setdefault(op, []).append(argument)
        self.presence = [op.compile(arguments) for op, arguments in grouped.items() if op.presence]
        self.tests = [op.compile(arguments) for op, arguments in grouped.items() if not op.presence]

    def holds(self, values: list, absent_counts: bool = True) -> bool:
        """Do the conditions hold for a key with these leaf values (none: the key has no value)? A key exists when
        it has a value other than null ("Key matching": exists applies to leaves, and `true` needs a non-null
        value); `absent_counts` False: an absent key matches no `exists: false` (a message without attributes)."""
        present = has_value(values)
        if (present or absent_counts) and any(test(present) for test in self.presence):
            return True
        if not self.tests:
            return False
        seen = set()
        for value in values:  # each distinct value once
            key = identity(value)
            if key in seen:
                continue
            seen.add(key)
            if any(test(value) for test in self.tests):
                return True
        return False


def has_value(values: list) -> bool:
    return any(value is not None for value in values)


def holds_one_by_one(conditions: list, values: list) -> bool:
    """The same answer as Conditions(conditions).holds(values), condition by condition (`one`): the meaning the
    compiled form is tested against."""
    for condition in conditions:
        op, argument = operator_of(condition)
        if op.presence:
            if op.one(argument, has_value(values)):
                return True
        elif any(op.one(argument, value) for value in values):
            return True
    return False

"""What one key of a filter policy may hold: its value types and its operators, each in one place (pure; no Django).

A *leaf value* is what a policy's conditions are compared with: a string, a number, `true`/`false` or `null`
(objects are not leaves; an array's elements, at any depth, are each a leaf). `value_kind` says which; `identity`
is how exact values compare (numbers by value to five digits after the decimal point, as Amazon SNS compares them;
`true` never equals `1`).

An operator is a class: `problem` says what is wrong with its argument (the caller names where), `one` is its
meaning for one argument and one value, written plainly, and `any_in` is the same question asked of many values at
once, through their `Index` (sorted strings, numbers and addresses, sets of identities), in about logarithmic time:
so a key's cost against a 26,000-element array is indexing the array once, then a few steps per condition, however
many conditions (and `$or` branches) ask about it. A test compares `any_in` with `one` over every pair and triple
of a pool of conditions. Adding an operator is adding a class to OPERATORS; adding a value type is `value_kind`,
`identity`, `Index` and the operators that take it.

SNS's documentation pages each operator comes from are named on its class (docs/filtering.md has the table).
"""

import bisect
import ipaddress
import json
import math
import operator
import re
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property, lru_cache

NUMERIC_LIMIT = 1e9  # SNS: numbers in a policy lie within ±10^9 ("Filter policy constraints")
PRECISION = 5        # SNS: "five digits of accuracy after the decimal point"
SCALE = 10 ** PRECISION


class FilterPolicyError(ValueError):
    """A policy SNS would refuse; the text names the offending part (`region[1]`, `$or[0].size`)."""


# --- value types ----------------------------------------------------------------------------------------------------

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


def exact_problem(value) -> str | None:
    """An exact condition: a string, a number within ±1e9, true, false or null ("Filter policy constraints": the
    JSON may hold strings, numbers and the keywords true, false and null)."""
    if is_number(value):
        return number_problem(value)
    if value_kind(value) is None:
        return "must be a string, a number, true, false, null or an operator object such as {\"prefix\": \"a\"}"
    return None


# --- many values at once ----------------------------------------------------------------------------------------

class Index:
    """A key's leaf values, indexed for conditions to ask about them: each structure is built once, when the first
    condition needs it, in one pass (and a sort) over the values."""

    def __init__(self, values: list):
        self.values = values

    @cached_property
    def present(self) -> bool:  # a key exists when it has a value other than null ("Key matching")
        return has_value(self.values)

    @cached_property
    def identities(self) -> set:
        return {identity(value) for value in self.values}

    @cached_property
    def others(self) -> set:
        """Identities of the values that are neither null nor strings (what no string condition can exclude)."""
        return {i for i in self.identities if i[0] not in ("string", "null")}

    @cached_property
    def strings(self) -> list[str]:
        return sorted({value for value in self.values if isinstance(value, str)})

    @cached_property
    def reversed_strings(self) -> list[str]:
        return sorted(value[::-1] for value in self.strings)

    @cached_property
    def folded(self) -> set[str]:
        return {value.casefold() for value in self.strings}

    @cached_property
    def numbers(self) -> list[int]:
        return sorted({scaled(value) for value in self.values if is_number(value) and finite(value)})

    @cached_property
    def addresses(self) -> dict[int, list[int]]:
        found: dict[int, set[int]] = {4: set(), 6: set()}
        for value in self.strings:
            address = _address(value)
            if address is not None:
                found[address.version].add(int(address))
        return {version: sorted(numbers) for version, numbers in found.items()}


def _starts(ordered: list[str], prefix: str) -> bool:
    """Does a sorted list hold a string starting with `prefix`? (They sit together, from where it would go.)"""
    at = bisect.bisect_left(ordered, prefix)
    return at < len(ordered) and ordered[at].startswith(prefix)


def _all_start(ordered: list[str], prefix: str) -> bool:
    """Does every string of a sorted list start with `prefix`? (Then the first and the last do.)"""
    return not ordered or (ordered[0].startswith(prefix) and ordered[-1].startswith(prefix))


# --- operators ------------------------------------------------------------------------------------------------------

class Operator:
    """One operator; subclasses set `name` and define `problem`, `one` and `any_in`."""

    name = ""
    presence = False  # decides on whether the key has a value at all (exists), not on the values

    def problem(self, argument) -> str | None:
        raise NotImplementedError

    def one(self, argument, value) -> bool:
        """Does this operator with `argument` hold for one leaf value?"""
        raise NotImplementedError

    def any_in(self, argument, index: Index) -> bool:
        """Does it hold for any of the indexed values? (`one` for each value, in a few steps.)"""
        raise NotImplementedError


def _non_empty_string(argument) -> str | None:
    return None if isinstance(argument, str) and argument else "must be a non-empty string"


class Exact(Operator):
    """A plain value: equal to it ("String value matching", "Numeric value matching": exact)."""

    name = "(exact)"

    def problem(self, argument):
        return exact_problem(argument)

    def one(self, argument, value):
        if isinstance(argument, str):
            return isinstance(value, str) and value == argument
        if argument is None or isinstance(argument, bool):
            return value is argument  # None, True and False are each one object
        return is_number(value) and finite(value) and scaled(value) == scaled(argument)

    def any_in(self, argument, index):
        return identity(argument) in index.identities


class Prefix(Operator):
    """{"prefix": "eu-"} ("String value matching": prefix)."""

    name = "prefix"
    problem = staticmethod(_non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.startswith(argument)

    def any_in(self, argument, index):
        return _starts(index.strings, argument)


class Suffix(Operator):
    """{"suffix": ".png"} ("String value matching": suffix)."""

    name = "suffix"
    problem = staticmethod(_non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.endswith(argument)

    def any_in(self, argument, index):
        return _starts(index.reversed_strings, argument[::-1])


class EqualsIgnoreCase(Operator):
    """{"equals-ignore-case": "RUGBY"} ("String value matching": equals-ignore-case)."""

    name = "equals-ignore-case"
    problem = staticmethod(_non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.casefold() == argument.casefold()

    def any_in(self, argument, index):
        return argument.casefold() in index.folded


class Exists(Operator):
    """{"exists": true|false}: the key has a value, or has none ("Key matching"). Only leaves exist (an object, an
    empty array are none), and a null is no value."""

    name = "exists"
    presence = True

    def problem(self, argument):
        return None if isinstance(argument, bool) else "must be true or false"

    def one(self, argument, value):  # asked with the key's presence as the value
        return value is argument

    def any_in(self, argument, index):
        return index.present is argument


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
        return finite(value) and all(NUMERIC_OPS[terms[i]](scaled(value), scaled(terms[i + 1]))
                                     for i in range(0, len(terms), 2))

    def any_in(self, terms, index):
        numbers = index.numbers
        if not numbers:
            return False
        if len(terms) == 2 and terms[0] == "=":
            at, wanted = bisect.bisect_left(numbers, scaled(terms[1])), scaled(terms[1])
            return at < len(numbers) and numbers[at] == wanted
        low = high = None
        for i in range(0, len(terms), 2):
            if terms[i] in (">", ">="):
                low = (terms[i], scaled(terms[i + 1]))
            else:
                high = (terms[i], scaled(terms[i + 1]))
        at = 0
        if low is not None:  # the smallest number above the lower bound ...
            at = (bisect.bisect_right if low[0] == ">" else bisect.bisect_left)(numbers, low[1])
        if at >= len(numbers):
            return False
        return high is None or NUMERIC_OPS[high[0]](numbers[at], high[1])  # ... is below the upper one


@lru_cache(maxsize=1024)
def network(text: str):
    return ipaddress.ip_network(text, strict=False)


_ADDRESS_LIKE = re.compile(r"[0-9A-Fa-f:.]{2,45}\Z")


def _address(value):
    if not isinstance(value, str) or not _ADDRESS_LIKE.match(value):  # an exception per non-address costs
        return None
    return _parsed_address(value)


@lru_cache(maxsize=65_536)
def _parsed_address(text: str):
    try:
        return ipaddress.ip_address(text)
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

    def any_in(self, argument, index):
        net = network(argument)
        numbers = index.addresses[net.version]
        at = bisect.bisect_left(numbers, int(net.network_address))
        return at < len(numbers) and numbers[at] <= int(net.broadcast_address)


MAX_WILDCARDS = 3  # per pattern, as SNS allows


@lru_cache(maxsize=4096)
def wildcard_pieces(pattern: str) -> tuple[str, ...] | None:
    """A wildcard pattern's literal pieces between its `*`s (a backslash escapes a star or a backslash); None for
    one SNS refuses: empty, another escape or a lone backslash, `**`, more than MAX_WILDCARDS stars."""
    pieces, current, escaped = [], [], False
    for ch in pattern:
        if escaped:
            if ch not in ("*", "\\"):
                return None
            current.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "*":
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped or not pattern:
        return None
    pieces.append("".join(current))
    if len(pieces) - 1 > MAX_WILDCARDS or any(piece == "" for piece in pieces[1:-1]):
        return None  # an empty piece between two stars is `**`
    return tuple(pieces)


def wildcard_matches(pieces: tuple[str, ...], text: str) -> bool:
    """Linear, without backtracking: each middle piece found left to right at its first place after the previous
    one, the first anchored at the start and the last at the end (right for patterns whose only wildcard is `*`)."""
    if len(pieces) == 1:
        return text == pieces[0]
    first, *middle, last = pieces
    if len(first) + len(last) > len(text) or not text.startswith(first) or not text.endswith(last):
        return False
    at, end = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _candidates(pieces: tuple[str, ...], index) -> list[str]:
    """The indexed strings a pattern may match: those with its first piece as prefix, else its last as suffix (a
    range of the sorted strings each), else all."""
    if pieces[0]:
        return _starting(index.strings, pieces[0])
    if pieces[-1]:
        return [text[::-1] for text in _starting(index.reversed_strings, pieces[-1][::-1])]
    return index.strings


def _starting(ordered: list[str], prefix: str) -> list[str]:
    """The strings of a sorted list that start with `prefix` (they sit together, from where it would go)."""
    start = end = bisect.bisect_left(ordered, prefix)
    while end < len(ordered) and ordered[end].startswith(prefix):
        end += 1
    return ordered[start:end]


class Wildcard(Operator):
    """{"wildcard": "*.png"}: `*` stands for any run of characters, at most three per pattern ("String value
    matching": wildcard). Matched without backtracking; against many values, only those its first piece (or its
    last) allows are checked."""

    name = "wildcard"

    def problem(self, argument):
        if not isinstance(argument, str) or wildcard_pieces(argument) is None:
            return (f"must be a pattern with at most {MAX_WILDCARDS} `*` (not two in a row; \\* for a literal star), "
                    f"such as \"*.png\"")
        return None

    def one(self, argument, value):
        return isinstance(value, str) and wildcard_matches(wildcard_pieces(argument), value)

    def any_in(self, argument, index):
        pieces = wildcard_pieces(argument)
        candidates = _candidates(pieces, index)
        longest = max(pieces, key=len)
        if longest and not (pieces[0] or pieces[-1]):  # unanchored: a C-level look for its longest piece first
            candidates = [text for text in candidates if longest in text]
        return any(wildcard_matches(pieces, text) for text in candidates)


class AnythingBut(Operator):
    """{"anything-but": v}: v a string, a number, a list of strings or of numbers, or {"prefix": "x"} /
    {"suffix": "x"} ("String value matching" and "Numeric value matching": anything-but). A value passes unless it
    is one of them (or has the prefix, the suffix); `null` passes none (SNS: anything-but does not match a missing
    or null value)."""

    name = "anything-but"
    AFFIXES = {"prefix": str.startswith, "suffix": str.endswith}

    def problem(self, argument):
        if isinstance(argument, dict):
            if len(argument) != 1 or next(iter(argument)) not in (*self.AFFIXES, "wildcard"):
                return "as an object it takes {\"prefix\": ...}, {\"suffix\": ...} or {\"wildcard\": ...}"
            (kind, value), = argument.items()
            problem = WILDCARD.problem(value) if kind == "wildcard" else _non_empty_string(value)
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
            if kind == "wildcard":
                return not WILDCARD.one(affix, value)
            return not (isinstance(value, str) and self.AFFIXES[kind](value, affix))
        excluded = argument if isinstance(argument, list) else [argument]
        return identity(value) not in {identity(item) for item in excluded}

    def any_in(self, argument, index):
        if isinstance(argument, dict):  # a value passes unless it is a string with the affix: unless all do
            (kind, affix), = argument.items()
            if index.others:
                return True
            if kind == "wildcard":  # unless every string matches the pattern
                pieces = wildcard_pieces(affix)
                return not all(wildcard_matches(pieces, text) for text in index.strings)
            if kind == "prefix":
                return not _all_start(index.strings, affix)
            return not _all_start(index.reversed_strings, affix[::-1])
        excluded = {identity(item) for item in (argument if isinstance(argument, list) else [argument])}
        candidates = index.identities - {("null", None)}
        return len(candidates) > sum(1 for item in excluded if item in candidates)  # one is not excluded


EXACT = Exact()
WILDCARD = Wildcard()
OPERATORS = {op.name: op for op in (Prefix(), Suffix(), EqualsIgnoreCase(), Exists(), Numeric(), Cidr(), WILDCARD,
                                     AnythingBut())}


def wildcard_count(condition) -> int:
    """1 for a condition that matches by a wildcard pattern (`wildcard`, `anything-but` with one), else 0."""
    if not isinstance(condition, dict) or len(condition) != 1:
        return 0
    (name, argument), = condition.items()
    return int(name == "wildcard" or (name == "anything-but" and isinstance(argument, dict) and "wildcard" in argument))


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
        shown = json.dumps(condition, ensure_ascii=False, default=str)[:100]
        return f"unknown operator {shown}; known: {', '.join(OPERATORS)}"
    (name, argument), = condition.items()
    problem = OPERATORS[name].problem(argument)
    if problem is None:
        return None
    return f".{name}{problem}" if problem.startswith((".", "[")) else f".{name}: {problem}"


def has_value(values: list) -> bool:
    return any(value is not None for value in values)


# A condition that cannot be asked of a value (a stored policy from before a rule, with an argument no operator
# takes any more) holds for none: the publish goes on.
UNASKABLE = (TypeError, ValueError, KeyError, AttributeError, OverflowError)


def prepared(conditions: list) -> list[tuple]:
    """(operator, argument) of each condition, read once; a condition no operator takes any more is left out."""
    found = []
    for condition in conditions:
        try:
            found.append(operator_of(condition))
        except UNASKABLE:
            continue
    return found


def holds_prepared(asks: list[tuple], values: list, absent_counts: bool = True) -> bool:
    """`holds_one_by_one` of conditions already `prepared`."""
    present = None
    for op, argument in asks:
        try:
            if op.presence:
                if present is None:
                    present = has_value(values)
                if (present or absent_counts) and op.one(argument, present):
                    return True
            else:
                for value in values:
                    if op.one(argument, value):
                        return True
        except UNASKABLE:
            continue
    return False


def holds_one_by_one(conditions: list, values: list, absent_counts: bool = True) -> bool:
    """Do the conditions hold for a key with these leaf values (none: the key has no value), condition by condition
    and value by value (`one`)? The meaning, and the cheaper way for a value or two. `absent_counts` False: an
    absent key matches no `exists: false` (a message without attributes)."""
    return holds_prepared(prepared(conditions), values, absent_counts)


def holds_indexed(conditions: list, index: Index, absent_counts: bool = True) -> bool:
    """The same answer as `holds_one_by_one`, each condition asking the values' index (`any_in`)."""
    return holds_prepared_indexed(prepared(conditions), index, absent_counts)


def holds_prepared_indexed(asks: list[tuple], index: Index, absent_counts: bool = True) -> bool:
    for op, argument in asks:
        try:
            if op.presence and not (index.present or absent_counts):
                continue
            if op.any_in(argument, index):
                return True
        except UNASKABLE:
            continue
    return False

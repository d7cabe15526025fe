"""Filter policies as Amazon SNS defines them, and event-type filters (pure; no Django).

A policy maps keys to a list of conditions; a message matches when every key matches one of its conditions.
With scope `MessageAttributes` (the default) the keys are the message's attributes; with `MessageBody` they are
keys of the JSON payload, and a key may hold a nested policy for a nested object. `$or` holds a list of policies of
which at least one must match. Conditions:

- an exact string or number (numbers compare by value; `null` matches a JSON null, body scope only);
- {"prefix": "x"}, {"suffix": "x"}, {"equals-ignore-case": "x"};
- {"anything-but": v}: v a string, a number, a list of them, or {"prefix": "x"} / {"suffix": "x"};
- {"numeric": ["=", 5]} or ranges such as [">", 0, "<=", 150] (values within ±1e9, as SNS);
- {"exists": true|false};
- {"cidr": "10.0.0.0/24"} (an IPv4 or IPv6 address string within the network).

A value that is a list (a body array) matches when one of its elements does. SNS's limits apply: at most 5 keys
(leaf keys, counted across nesting and `$or` branches) and 150 combinations (the product of each key's number of
conditions; `$or` branches add up). Every error names the part of the policy it is about.

Event-type filters are a simpler field: a list of event types, exact or with `*` wildcards (`order.*`); an empty
list matches every event type.
"""

import bisect
import ipaddress
import json
import math
import operator
import re
from functools import lru_cache

from subscriptions.states import FILTER_SCOPES

SCOPES = FILTER_SCOPES
ATTRIBUTES, BODY = SCOPES
MAX_KEYS = 5
MAX_COMBINATIONS = 150
MAX_DEPTH = 10
MAX_POLICY_BYTES = 256 * 1024
NUMERIC_LIMIT = 1e9
MAX_EVENT_TYPES = 25
EVENT_TYPE_KEY = "(event type)"  # how a failed event-type filter is recorded among the failing keys
OR = "$or"
NUMERIC_OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
STRING_RULES = ("prefix", "suffix", "equals-ignore-case")
RULES = (*STRING_RULES, "anything-but", "numeric", "exists", "cidr")


class FilterPolicyError(ValueError):
    """A policy SNS would refuse; the text names the offending part (`region[1]`, `$or[0].size`)."""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value) -> bool:
    return _number(value) and math.isfinite(value)


# --- validation ---------------------------------------------------------------------------------------------------

def validate(policy, scope: str = ATTRIBUTES) -> None:
    """Raise FilterPolicyError unless `policy` is a policy SNS accepts for `scope`."""
    if scope not in SCOPES:
        raise FilterPolicyError(f"filter_policy_scope must be one of {', '.join(SCOPES)}")
    if policy in (None, {}):
        return
    if not isinstance(policy, dict):
        raise FilterPolicyError("must be an object mapping keys to lists of conditions")
    if len(json.dumps(policy, ensure_ascii=False).encode()) > MAX_POLICY_BYTES:
        raise FilterPolicyError(f"is larger than {MAX_POLICY_BYTES // 1024} KiB")
    _check_object(policy, "", scope, depth=1)
    keys = sorted(leaf_keys(policy))
    if len(keys) > MAX_KEYS:
        raise FilterPolicyError(f"has {len(keys)} keys ({', '.join(keys)}); at most {MAX_KEYS} are allowed")
    total = combinations(policy)
    if total > MAX_COMBINATIONS:
        raise FilterPolicyError(f"has {total} combinations ({_combination_terms(policy)}); at most "
                                f"{MAX_COMBINATIONS} are allowed")


def _check_object(policy: dict, path: str, scope: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise FilterPolicyError(f"{path or 'the policy'}: nested more than {MAX_DEPTH} levels deep")
    if not policy:
        raise FilterPolicyError(f"{path or 'the policy'}: must not be empty")
    for key, conditions in policy.items():
        here = f"{path}.{key}" if path else key
        if key == OR:
            if not isinstance(conditions, list) or len(conditions) < 2 or not all(
                    isinstance(branch, dict) for branch in conditions):
                raise FilterPolicyError(f"{here}: must be a list of at least two policy objects")
            for n, branch in enumerate(conditions):
                _check_object(branch, f"{here}[{n}]", scope, depth + 1)
        elif isinstance(conditions, dict):
            if scope != BODY:
                raise FilterPolicyError(f"{here}: nested keys need filter_policy_scope MessageBody")
            _check_object(conditions, here, scope, depth + 1)
        elif isinstance(conditions, list) and conditions:
            for n, condition in enumerate(conditions):
                _check_condition(condition, f"{here}[{n}]", scope)
        else:
            raise FilterPolicyError(f"{here}: must be a non-empty list of conditions")


def _check_condition(condition, path: str, scope: str) -> None:
    if condition is None:
        if scope != BODY:
            raise FilterPolicyError(f"{path}: null matches only with filter_policy_scope MessageBody")
        return
    if isinstance(condition, str) or _finite(condition):
        return
    if not isinstance(condition, dict):
        raise FilterPolicyError(f"{path}: must be a string, a number or a rule object such as {{\"prefix\": \"a\"}}")
    if len(condition) != 1 or next(iter(condition)) not in RULES:
        raise FilterPolicyError(f"{path}: unknown rule {json.dumps(condition)[:100]}; known: {', '.join(RULES)}")
    (kind, argument), = condition.items()
    here = f"{path}.{kind}"
    if kind in STRING_RULES:
        if not isinstance(argument, str) or not argument:
            raise FilterPolicyError(f"{here}: must be a non-empty string")
    elif kind == "exists":
        if not isinstance(argument, bool):
            raise FilterPolicyError(f"{here}: must be true or false")
    elif kind == "cidr":
        try:
            if not isinstance(argument, str):  # ipaddress reads an integer as an address: 5 is 0.0.0.5/32
                raise TypeError(argument)
            ipaddress.ip_network(argument, strict=False)
        except (TypeError, ValueError):
            raise FilterPolicyError(f"{here}: must be an IP network such as \"10.0.0.0/24\"") from None
    elif kind == "numeric":
        _check_numeric(argument, here)
    else:
        _check_anything_but(argument, here)


def _check_numeric(terms, path: str) -> None:
    example = "such as [\"=\", 5] or [\">\", 0, \"<=\", 150]"
    if not isinstance(terms, list) or len(terms) not in (2, 4):
        raise FilterPolicyError(f"{path}: must be one or two comparisons, {example}")
    pairs = [(terms[i], terms[i + 1]) for i in range(0, len(terms), 2)]
    for n, (op, value) in enumerate(pairs):
        if not isinstance(op, str) or op not in NUMERIC_OPS:
            raise FilterPolicyError(f"{path}[{2 * n}]: unknown operator {json.dumps(op)[:20]}; use one of "
                                    f"{', '.join(NUMERIC_OPS)}")
        if not _finite(value) or abs(value) > NUMERIC_LIMIT:
            raise FilterPolicyError(f"{path}[{2 * n + 1}]: must be a number between -1e9 and 1e9")
    if len(pairs) == 2:
        (low_op, low), (high_op, high) = pairs
        if low_op not in (">", ">=") or high_op not in ("<", "<="):
            raise FilterPolicyError(f"{path}: a range is a lower bound (> or >=) then an upper bound (< or <=)")
        if low >= high:
            raise FilterPolicyError(f"{path}: the lower bound {low} is not below the upper bound {high}")


def _check_anything_but(argument, path: str) -> None:
    if isinstance(argument, dict):
        if len(argument) != 1 or next(iter(argument)) not in ("prefix", "suffix"):
            raise FilterPolicyError(f"{path}: as an object it takes {{\"prefix\": ...}} or {{\"suffix\": ...}}")
        (kind, value), = argument.items()
        if not isinstance(value, str) or not value:
            raise FilterPolicyError(f"{path}.{kind}: must be a non-empty string")
        return
    values = argument if isinstance(argument, list) else [argument]
    if not values:
        raise FilterPolicyError(f"{path}: must not be an empty list")
    for n, value in enumerate(values):
        if not (isinstance(value, str) or _finite(value)):
            where = f"{path}[{n}]" if isinstance(argument, list) else path
            raise FilterPolicyError(f"{where}: must be a string or a number")


def leaf_keys(policy: dict, path: str = "") -> set[str]:
    """Every key that holds conditions, as a dotted path (the keys SNS's limit counts)."""
    keys = set()
    for key, conditions in policy.items():
        if key == OR:
            for branch in conditions:
                keys |= leaf_keys(branch, path)
        elif isinstance(conditions, dict):
            keys |= leaf_keys(conditions, f"{path}{key}.")
        else:
            keys.add(f"{path}{key}")
    return keys


def combinations(policy: dict) -> int:
    """SNS's count: the product over keys of each key's number of conditions; `$or` branches add up."""
    total = 1
    for key, conditions in policy.items():
        if key == OR:
            total *= sum(combinations(branch) for branch in conditions)
        elif isinstance(conditions, dict):
            total *= combinations(conditions)
        else:
            total *= len(conditions)
    return total


def _combination_terms(policy: dict) -> str:
    terms = []
    for key, conditions in policy.items():
        count = (sum(combinations(b) for b in conditions) if key == OR
                 else combinations(conditions) if isinstance(conditions, dict) else len(conditions))
        terms.append(f"{key} {count}")
    return " × ".join(terms)


def problems(*, policy=None, scope: str = ATTRIBUTES, event_types=None) -> dict[str, str]:
    """What is wrong with a subscription's filters, by field (`filter_policy`, `event_types`); empty when nothing.
    The API's serializers and the admin's form all ask this."""
    found = {}
    for name, check in (("filter_policy", lambda: validate(policy, scope)),
                        ("event_types", lambda: validate_event_types(event_types))):
        try:
            check()
        except FilterPolicyError as exc:
            found[name] = str(exc)
    return found


# --- matching -----------------------------------------------------------------------------------------------------

def _cidr_contains(network: str, value) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return ipaddress.ip_address(value) in _network(network)
    except ValueError:
        return False


@lru_cache(maxsize=1024)
def _network(text: str):
    return ipaddress.ip_network(text, strict=False)


def _rule_matches(rule, present: bool, value) -> bool:
    """Does one condition hold for a value (`present`: the key exists)? A list value matches when an element does."""
    if isinstance(value, list) and not (isinstance(rule, dict) and "exists" in rule):
        return any(_rule_matches(rule, present, item) for item in value)
    if not isinstance(rule, dict):
        if not present:
            return False
        if rule is None:
            return value is None
        if _number(rule):
            return _number(value) and value == rule
        return isinstance(value, str) and value == rule
    (kind, argument), = rule.items()
    if kind == "exists":
        return present is argument
    if not present:
        return False
    if kind == "prefix":
        return isinstance(value, str) and value.startswith(argument)
    if kind == "suffix":
        return isinstance(value, str) and value.endswith(argument)
    if kind == "equals-ignore-case":
        return isinstance(value, str) and value.casefold() == argument.casefold()
    if kind == "numeric":
        return _number(value) and all(NUMERIC_OPS[argument[i]](value, argument[i + 1])
                                      for i in range(0, len(argument), 2))
    if kind == "cidr":
        return _cidr_contains(argument, value)
    if kind == "anything-but":
        if value is None:
            return False
        if isinstance(argument, dict):
            (how, affix), = argument.items()
            if not isinstance(value, str):
                return True
            return not (value.startswith(affix) if how == "prefix" else value.endswith(affix))
        return not _excluded(argument, value)
    return False


_exclusions: dict[int, tuple[object, frozenset, frozenset]] = {}  # id(list) → (the list, its strings, its numbers)


def _excluded(argument, value) -> bool:
    """Is `value` one of `anything-but`'s values (strings equal as strings, numbers by value)? A set lookup: the
    sets are built once per list object (policies are decoded once per process and shared), so a long list costs
    its length once, not once per element of every message's array."""
    if not isinstance(argument, list):
        if isinstance(argument, str):
            return isinstance(value, str) and value == argument
        return _number(value) and value == argument
    entry = _exclusions.get(id(argument))
    if entry is None or entry[0] is not argument:
        if len(_exclusions) > 10_000:
            _exclusions.clear()
        entry = _exclusions[id(argument)] = (argument, frozenset(a for a in argument if isinstance(a, str)),
                                             frozenset(a for a in argument if _number(a)))
    if isinstance(value, str):
        return value in entry[1]
    return _number(value) and value in entry[2]


class _Conditions:
    """One key's conditions compiled for matching in about constant time per value, whatever their number: exact
    values, `equals-ignore-case` and `anything-but` lists as set lookups, prefixes and suffixes as one C-level
    `startswith`/`endswith` of a tuple, networks by prefix length, numeric ranges as a binary search over their
    bounds. Without it, an array of 28,000 elements against 150 conditions (what the limits allow) cost one check
    per pair: 2–28 s per publish. The meaning is `_rule_matches`'s, condition by condition (a test compares
    them)."""

    def __init__(self, conditions: list):
        self.exists = {rule["exists"] for rule in conditions if isinstance(rule, dict) and "exists" in rule}
        self.none = any(rule is None for rule in conditions)
        self.strings = {rule for rule in conditions if isinstance(rule, str)}
        self.numbers = {rule for rule in conditions if _number(rule)}
        rules = [next(iter(rule.items())) for rule in conditions if isinstance(rule, dict) and rule]
        self.prefixes = tuple(argument for kind, argument in rules if kind == "prefix")
        self.suffixes = tuple(argument for kind, argument in rules if kind == "suffix")
        self.folded = {argument.casefold() for kind, argument in rules if kind == "equals-ignore-case"}
        self.networks: dict[tuple[int, int], set[int]] = {}
        for kind, argument in rules:
            if kind == "cidr":
                network = _network(argument)
                self.networks.setdefault((network.version, network.prefixlen), set()).add(
                    int(network.network_address) >> (network.max_prefixlen - network.prefixlen))
        self.ranges = [argument for kind, argument in rules if kind == "numeric"]
        self.bounds, self.covered = self._segments(self.ranges)
        excluded = [argument for kind, argument in rules if kind == "anything-but" and not isinstance(argument, dict)]
        self.anything_but = bool(excluded)  # a value of another type (true, an object) passes every such list
        as_lists = [argument if isinstance(argument, list) else [argument] for argument in excluded]
        self.excluded_strings = set.intersection(*[{a for a in x if isinstance(a, str)} for x in as_lists]) \
            if as_lists else set()
        self.excluded_numbers = set.intersection(*[{a for a in x if _number(a)} for x in as_lists]) \
            if as_lists else set()
        affixes = [next(iter(argument.items())) for kind, argument in rules
                   if kind == "anything-but" and isinstance(argument, dict)]
        self.not_prefixed = self._all_of([a for how, a in affixes if how == "prefix"], str.startswith)
        self.not_suffixed = self._all_of([a for how, a in affixes if how == "suffix"], str.endswith)

    @staticmethod
    def _all_of(affixes: list[str], test):
        """For `anything-but` prefixes (suffixes): a value passes one of them unless it has every one. (None: no
        such condition; False: no value can have them all; else the affix that having all of them comes down to.)"""
        if not affixes:
            return None
        longest = max(affixes, key=len)
        return longest if all(test(longest, affix) for affix in affixes) else False

    @staticmethod
    def _segments(ranges: list) -> tuple[list, list[bool]]:
        """The ranges' bounds, sorted, and whether any range holds each segment they cut the line into (below
        the first bound, each bound, between bounds, above the last): within a segment the answer is the same."""
        if not ranges:
            return [], []
        bounds = sorted({term for terms in ranges for term in terms[1::2]})
        points = [bounds[0] - 1]
        for low, high in zip(bounds, bounds[1:], strict=False):
            points += [low, (low + high) / 2]
        points += [bounds[-1], bounds[-1] + 1]
        covered = [any(all(NUMERIC_OPS[terms[i]](point, terms[i + 1]) for i in range(0, len(terms), 2))
                       for terms in ranges) for point in points]
        return bounds, covered

    def matches(self, present: bool, value) -> bool:
        if present in self.exists:
            return True
        return present and self.holds(value)

    def holds(self, value) -> bool:
        if isinstance(value, list):  # any element; each distinct string or number once
            seen = set()
            for item in value:
                if isinstance(item, str) or _number(item):
                    key = (isinstance(item, str), item)
                    if key in seen:
                        continue
                    seen.add(key)
                if self.holds(item):
                    return True
            return False
        if value is None:
            return self.none
        if isinstance(value, str):
            return (value in self.strings or (bool(self.prefixes) and value.startswith(self.prefixes))
                    or (bool(self.suffixes) and value.endswith(self.suffixes))
                    or (bool(self.folded) and value.casefold() in self.folded)
                    or (bool(self.networks) and self._in_networks(value))
                    or (self.anything_but and value not in self.excluded_strings)
                    or (self.not_prefixed is not None
                        and (self.not_prefixed is False or not value.startswith(self.not_prefixed)))
                    or (self.not_suffixed is not None
                        and (self.not_suffixed is False or not value.endswith(self.not_suffixed))))
        affixed = self.not_prefixed is not None or self.not_suffixed is not None
        if _number(value):
            return (value in self.numbers or self._in_ranges(value)
                    or (self.anything_but and value not in self.excluded_numbers) or affixed)
        return self.anything_but or affixed

    def _in_networks(self, value: str) -> bool:
        if not _ADDRESS_LIKE.match(value):  # parsing what cannot be an address costs an exception each
            return False
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return False
        number, bits = int(address), address.max_prefixlen
        return any(number >> (bits - length) in networks
                   for (version, length), networks in self.networks.items() if version == address.version)

    def _in_ranges(self, value) -> bool:
        if not self.bounds:
            return False
        index = bisect.bisect_left(self.bounds, value)
        if index < len(self.bounds) and self.bounds[index] == value:
            return self.covered[2 * index + 1]
        return self.covered[2 * index]


_ADDRESS_LIKE = re.compile(r"[0-9A-Fa-f:.]{2,45}\Z")
COMPILE_AT = 256  # a key's conditions × an array's elements beyond which the conditions are compiled
_compiled_conditions: dict[int, tuple[list, _Conditions]] = {}


def _compiled(conditions: list) -> _Conditions:
    """Compiled once per list object (policies are decoded once per process and shared)."""
    entry = _compiled_conditions.get(id(conditions))
    if entry is None or entry[0] is not conditions:
        if len(_compiled_conditions) > 10_000:
            _compiled_conditions.clear()
        entry = _compiled_conditions[id(conditions)] = (conditions, _Conditions(conditions))
    return entry[1]


def _failing(policy: dict, data, path: str) -> str | None:
    """The first key (dotted path) of `policy` that `data` fails, or None when it matches."""
    for key, conditions in policy.items():
        if key == OR:
            if not any(_failing(branch, data, path) is None for branch in conditions):
                return f"{path}{OR}"
            continue
        present = isinstance(data, dict) and key in data
        value = data.get(key) if present else None
        if isinstance(conditions, dict):  # nested (body scope): the object, or one object of an array
            items = value if isinstance(value, list) else [value]
            inner = [_failing(conditions, item if isinstance(item, dict) else None, f"{path}{key}.")
                     for item in items]
            if None not in inner:
                return inner[0]
            continue
        if isinstance(value, list) and len(value) * len(conditions) > COMPILE_AT:
            matched = _compiled(conditions).matches(present, value)
        else:  # a value, or a short array: one check per condition costs less than compiling them
            matched = any(_rule_matches(rule, present, value) for rule in conditions)
        if not matched:
            return f"{path}{key}"
    return None


def body_of(payload, payload_is_text: bool = False):
    """What a MessageBody policy filters on: the JSON payload (a text payload that parses as JSON counts)."""
    if not payload_is_text:
        return payload
    try:
        return json.loads(payload)
    except (TypeError, ValueError):
        return None


def failing_key(policy, attributes: dict, *, scope: str = ATTRIBUTES, body=None) -> str | None:
    """The first key whose conditions the message fails (an attribute name, or a dotted body path; `$or` when no
    branch matched), or None when it matches. `body`: the parsed payload, for the MessageBody scope."""
    if not policy:
        return None
    return _failing(policy, body if scope == BODY else attributes, "")


def matches(policy, attributes: dict, *, scope: str = ATTRIBUTES, body=None) -> bool:
    return failing_key(policy, attributes, scope=scope, body=body) is None


# --- event-type filters -------------------------------------------------------------------------------------------

def validate_event_types(patterns) -> None:
    if patterns in (None, []):
        return
    if not isinstance(patterns, list) or len(patterns) > MAX_EVENT_TYPES:
        raise FilterPolicyError(f"must be a list of at most {MAX_EVENT_TYPES} event types")
    for n, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern or len(pattern) > 256:
            raise FilterPolicyError(f"[{n}]: must be an event type of 1 to 256 characters, such as order.* ")
        if any(not ch.isprintable() or ch.isspace() for ch in pattern):
            raise FilterPolicyError(f"[{n}]: must not contain spaces or control characters")


@lru_cache(maxsize=4096)
def glob_matches(pattern: str, text: str) -> bool:
    """Does `text` match `pattern`, where `*` stands for any run of characters? Linear, without backtracking: the
    literal pieces between stars are found left to right, each at its first place after the previous one (the
    first piece anchored at the start, the last at the end), which is right for patterns whose only wildcard is
    `*`. A regular expression would backtrack: `*a*a*a*a*a*a*a*a*b` against forty `a`s took seconds."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return pattern == text
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


def event_type_matches(patterns, event_type: str) -> bool:
    """Does `event_type` match one of the patterns (exact, or `*` for any run of characters)? No patterns: yes."""
    if not patterns:
        return True
    return any(glob_matches(p, event_type) for p in patterns)


# --- explanations -------------------------------------------------------------------------------------------------

def _lookup(data, path: str) -> tuple[bool, object]:
    value = data
    for part in path.split("."):
        if isinstance(value, list):
            value = next((item[part] for item in value if isinstance(item, dict) and part in item), None)
            if value is None:
                return False, None
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return False, None
    return True, value


def _conditions_at(policy: dict, path: str):
    node = policy
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def explain(policy, attributes: dict, key: str | None = None, *, scope: str = ATTRIBUTES, body=None,
            event_types=None, event_type: str | None = None) -> str:
    """Why a message fails its subscription's filters, in words: the failing key (`key`, else the first), its value
    and the conditions it did not meet."""
    if key == EVENT_TYPE_KEY:
        return (f"event type {event_type!r} matches none of {json.dumps(event_types or [], ensure_ascii=False)}"
                if event_type is not None else "the event type matched none of the subscription's event types")
    key = key if key is not None else failing_key(policy, attributes, scope=scope, body=body)
    if key is None:
        return "the message matches the filter policy"
    noun = "body key" if scope == BODY else "attribute"
    if key.endswith(OR):
        return f"the message matches none of the {OR} branches of the filter policy"
    conditions = _conditions_at(policy or {}, key) if scope == BODY else (policy or {}).get(key)
    if conditions is None:
        return f"the filter policy's rules for {noun} {key!r} did not match (the policy has changed since)"
    rules = json.dumps(conditions, ensure_ascii=False)
    if scope == BODY:
        present, value = _lookup(body, key) if isinstance(body, (dict, list)) else (False, None)
    else:
        present, value = key in attributes, attributes.get(key)
    if not present:
        return f"{noun} {key!r} is missing; the filter policy requires {rules}"
    value = json.dumps(value, ensure_ascii=False)
    if len(value) > 200:
        value = value[:200] + "…"
    return f"{noun} {key!r} is {value}, which meets none of {rules}"

"""Filter policies as Amazon SNS defines them, and event-type filters (pure; no Django).

A policy maps keys to a list of conditions; a message matches when every key matches one of its conditions.
With scope `MessageAttributes` (the default) the keys are the message's attributes (a `String`, `Number` or
`String.Array` value: a string, a number, or a list whose elements are each matched); with `MessageBody` they are
paths into the JSON payload: a key may hold a nested policy for a nested object, and a dotted key is a path
(`{"store.city": [...]}` is `{"store": {"city": [...]}}`; the payload's own dotted keys are paths too). `$or` holds
a list of at least two policies of which one must match. What each condition means is delivery/rules/
filter_operators.py (one class per operator).

The policy is read into a tree once per decoded policy (`shape`): a node holds leaf keys (a key's conditions),
nested nodes (body scope) and `$or` branches. Matching walks the payload along it: a nested node over an array of
objects matches when one object matches all of it (arrays of arrays included), so two keys of one object are
matched in the same element.

SNS's limits apply, as it counts them ("Filter policy constraints"): at most 5 keys (leaf paths, across nesting
and `$or` branches), at most 150 combinations (each key's number of conditions times its depth in the policy,
multiplied across keys, `$or` branches adding up), 256 KiB of JSON. Every error names the part of the policy it is
about.

Event-type filters, the simpler field beside it, are delivery/rules/event_type_filter.py.
"""

import json

from delivery.rules.event_type_filter import validate_event_types
from delivery.rules.filter_operators import (
    OPERATORS,
    FilterPolicyError,
    Index,
    condition_problem,
    holds_prepared,
    holds_prepared_indexed,
    prepared,
    value_kind,
    wildcard_count,
)
from subscriptions.states import FILTER_SCOPES

SCOPES = FILTER_SCOPES
ATTRIBUTES, BODY = SCOPES
MAX_KEYS = 5
MAX_COMBINATIONS = 150
MAX_WILDCARD_CONDITIONS = 5  # Herald's bound on the cost of wildcards (SNS bounds them by complexity points)
MAX_DEPTH = 10
MAX_POLICY_BYTES = 256 * 1024
EVENT_TYPE_KEY = "(event type)"  # how a failed event-type filter is recorded among the failing keys
OR = "$or"


# --- the policy's shape -----------------------------------------------------------------------------------------

class Node:
    """One object of a policy: its entries in the policy's order, each ("leaf", key, conditions), ("nested", key,
    Node) or ("or", [Node, …]); a key is one step of a path (a body policy's dotted keys are split into steps and
    the steps they share are one nested node; an attribute name is one step)."""

    __slots__ = ("entries", "_nested")

    def __init__(self):
        self.entries: list[tuple] = []
        self._nested: dict[str, Node] = {}

    def child(self, key: str) -> "Node":
        if key not in self._nested:
            self._nested[key] = Node()
            self.entries.append(("nested", key, self._nested[key]))
        return self._nested[key]

    def leaf(self, key: str, conditions: list) -> None:
        self.entries.append(("leaf", key, Leaf(conditions)))

    def either(self, branches: list["Node"]) -> None:
        self.entries.append(("or", None, branches))


class Leaf:
    """A key's conditions: checked one by one against a value or two, and against many values through the values'
    index (filter_operators.Index, built once per key and message however many conditions and `$or` branches ask)."""

    __slots__ = ("conditions", "asks")

    def __init__(self, conditions: list):
        self.conditions, self.asks = conditions, prepared(conditions)

    def holds(self, values: list, asked: "_Asked", data, key: str, absent_counts: bool = True) -> bool:
        if len(values) * len(self.asks) <= INDEX_AT:
            return holds_prepared(self.asks, values, absent_counts)
        return holds_prepared_indexed(self.asks, asked.index(data, key, values), absent_counts)


INDEX_AT = 64  # values × conditions beyond which a key's values are indexed rather than checked one by one


def is_or(key, value) -> bool:
    """SNS reads `$or` as an operator only when it holds a list of at least two objects none of whose keys is an
    operator's name; otherwise `$or` is a key like any other ("AND/OR logic": OR operator)."""
    return (key == OR and isinstance(value, list) and len(value) >= 2
            and all(isinstance(b, dict) and not (b.keys() & OPERATORS.keys()) for b in value))


def _steps(key: str, scope: str) -> list[str]:
    return key.split(".") if scope == BODY else [key]


def _read(policy: dict, scope: str, where: str, node: Node, depth: int, strict: bool = True) -> None:
    """Read `policy` into `node`, checking it (`strict`); FilterPolicyError names the first part SNS would refuse.
    Not strict: a stored policy, checked when it was written, is read as it is, also one written before a rule
    was added (a number over 1e9), so that a publish never fails on it."""
    if not strict:
        pass
    elif depth > MAX_DEPTH:
        raise FilterPolicyError(f"{where or 'the policy'}: nested more than {MAX_DEPTH} levels deep")
    elif not policy:
        raise FilterPolicyError(f"{where or 'the policy'}: must not be empty")
    for key, value in policy.items():
        here = f"{where}.{key}" if where else key
        if is_or(key, value):
            branches = []
            for n, branch in enumerate(value):
                branches.append(Node())
                _read(branch, scope, f"{here}[{n}]", branches[-1], depth + 1, strict)
            node.either(branches)
            continue
        if strict and key == OR and isinstance(value, list) and any(
                isinstance(b, dict) and not (b.keys() & OPERATORS.keys()) for b in value):
            raise FilterPolicyError(f"{here}: must be a list of at least two policy objects to be SNS's {OR} "
                                    f"operator (otherwise {OR} is a key like any other, and its list holds conditions)")
        if strict and (not isinstance(key, str) or not key or (scope == BODY and "" in key.split("."))):
            raise FilterPolicyError(f"{here or repr(key)}: a key must be a non-empty name (a dotted path's steps "
                                    f"too)")
        steps = _steps(key, scope)
        target = node
        for step in steps[:-1]:
            target = target.child(step)
        if isinstance(value, dict):
            if scope != BODY:
                raise FilterPolicyError(f"{here}: filter policy scope MessageAttributes does not support nested "
                                        f"filter policy (nested keys need filter_policy_scope MessageBody)")
            _read(value, scope, here, target.child(steps[-1]), depth + len(steps), strict)
        elif isinstance(value, list) and value:
            if strict and depth + len(steps) - 1 > MAX_DEPTH:
                raise FilterPolicyError(f"{here}: nested more than {MAX_DEPTH} levels deep")
            if strict and any(kind == "leaf" and other == steps[-1] for kind, other, _ in target.entries):
                raise FilterPolicyError(f"{here}: the same path twice (as a dotted key and inside a nested one); "
                                        f"give its conditions once")
            for n, condition in enumerate(value if strict else ()):
                problem = condition_problem(condition)
                if problem:
                    joined = f"{here}[{n}]{problem}" if problem.startswith((".", "[")) else f"{here}[{n}]: {problem}"
                    raise FilterPolicyError(joined)
            target.leaf(steps[-1], value)
        elif strict:
            raise FilterPolicyError(f"{here}: must be a non-empty list of conditions"
                                    + (" or a nested policy" if scope == BODY else ""))
        else:
            target.leaf(steps[-1], [])  # nothing it could match


def shape(policy, scope: str = ATTRIBUTES, *, strict: bool = True) -> Node:
    """The policy's tree (checked unless not `strict`); raises FilterPolicyError for one SNS would refuse."""
    if scope not in SCOPES:
        raise FilterPolicyError(f"filter_policy_scope must be one of {', '.join(SCOPES)}")
    if not isinstance(policy, dict):
        raise FilterPolicyError("must be an object mapping keys to lists of conditions")
    root = Node()
    _read(policy, scope, "", root, 1, strict)
    return root


def leaf_keys(policy: dict, scope: str = BODY) -> set[str]:
    """Every key that holds conditions, as a dotted path (the keys SNS's limit counts)."""
    return _leaf_paths(shape(policy, scope), "")


def _leaf_paths(node: Node, prefix: str) -> set[str]:
    keys = set()
    for kind, key, item in node.entries:
        if kind == "leaf":
            keys.add(prefix + key)
        elif kind == "nested":
            keys |= _leaf_paths(item, f"{prefix}{key}.")
        else:
            for branch in item:
                keys |= _leaf_paths(branch, prefix)
    return keys


def _count(node: Node, depth: int) -> tuple[int, list[str]]:
    """(combinations, the terms they are made of) of a node whose keys are at `depth` (1 at the top)."""
    total, terms = 1, []
    for kind, key, item in node.entries:
        if kind == "leaf":
            n = len(item.conditions)
            total *= depth * n
            terms.append(f"{key} {n}" if depth == 1 else f"{key} {n} × depth {depth}")
        elif kind == "nested":
            inner = _count(item, depth + 1)[0]
            total *= inner
            terms.append(f"{key}.… {inner}")
        else:
            inner = sum(_count(branch, depth)[0] for branch in item)
            total *= inner
            terms.append(f"{OR} {inner}")
    return total, terms


def _all_conditions(node: Node) -> list:
    found = []
    for kind, _, item in node.entries:
        if kind == "leaf":
            found += item.conditions
        elif kind == "nested":
            found += _all_conditions(item)
        else:
            for branch in item:
                found += _all_conditions(branch)
    return found


def combinations(policy: dict, scope: str = BODY) -> int:
    """SNS's count: each key's number of conditions times its depth, multiplied across keys; `$or` branches add
    up. (A flat policy's is the product of its keys' numbers of conditions.)"""
    return _count(shape(policy, scope), 1)[0]


# --- validation -------------------------------------------------------------------------------------------------

def validate(policy, scope: str = ATTRIBUTES) -> None:
    """Raise FilterPolicyError unless `policy` is a policy SNS accepts for `scope`."""
    if scope not in SCOPES:
        raise FilterPolicyError(f"filter_policy_scope must be one of {', '.join(SCOPES)}")
    if policy in (None, {}):
        return
    if not isinstance(policy, dict):
        raise FilterPolicyError("must be an object mapping keys to lists of conditions")
    try:
        size = len(json.dumps(policy, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        raise FilterPolicyError("must be JSON: an object of keys (strings) to lists of conditions") from None
    if size > MAX_POLICY_BYTES:
        raise FilterPolicyError(f"is larger than {MAX_POLICY_BYTES // 1024} KiB")
    root = shape(policy, scope)
    keys = sorted(_leaf_paths(root, ""))
    if len(keys) > MAX_KEYS:
        raise FilterPolicyError(f"has {len(keys)} keys ({', '.join(keys)}); at most {MAX_KEYS} are allowed")
    patterns = sum(wildcard_count(c) for c in _all_conditions(root))
    if patterns > MAX_WILDCARD_CONDITIONS:
        raise FilterPolicyError(f"has {patterns} wildcard conditions; at most {MAX_WILDCARD_CONDITIONS} are allowed "
                                f"(each is matched against every string of a value, so their number is bounded)")
    total, terms = _count(root, 1)
    if total > MAX_COMBINATIONS:
        raise FilterPolicyError(f"has {total} combinations ({' × '.join(terms)}); at most {MAX_COMBINATIONS} are "
                                f"allowed (SNS counts each key's conditions times its depth)")


def problems(*, policy=None, scope: str = ATTRIBUTES, event_types=None) -> dict[str, str]:
    """What is wrong with a subscription's filters, by field (`filter_policy`, `event_types`); empty when nothing.
    The subscription service asks this for every door."""
    found = {}
    for name, check in (("filter_policy", lambda: validate(policy, scope)),
                        ("event_types", lambda: validate_event_types(event_types))):
        try:
            check()
        except FilterPolicyError as exc:
            found[name] = str(exc)
    return found


# --- matching ---------------------------------------------------------------------------------------------------

def _leaves_of(value, into: list) -> list:
    """The leaf values of a value: itself, or an array's elements at any depth; objects are none. (A loop, not a
    recursion: a text message's JSON is as deep as its sender made it.)"""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif value_kind(item) is not None:
            into.append(item)
    return into


def _objects_of(value, into: list) -> list:
    """The objects of a value: itself, or an array's objects at any depth (arrays of arrays included)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            into.append(item)
    return into


def _dotted(data: dict, key: str) -> dict | None:
    """The payload's own dotted keys under `key` as an object: {"a.b": 1} read at `a` is {"b": 1}."""
    prefix = key + "."
    found = {name[len(prefix):]: value for name, value in data.items()
             if isinstance(name, str) and name.startswith(prefix)}
    return found or None


def _values(data, key: str) -> list:
    """The leaf values `data` (an object, or None) holds at one step `key`."""
    if not isinstance(data, dict) or key not in data:
        return []
    value = data[key]
    if not isinstance(value, list):
        return [value] if value_kind(value) is not None else []
    return _leaves_of(value, [])


def _objects(data, key: str, scope: str) -> list:
    """The objects `data` holds at one step `key` (the payload's dotted keys continuing the path among them)."""
    if not isinstance(data, dict):
        return []
    objects = _objects_of(data[key], []) if key in data else []
    if scope == BODY and (len(data) > 1 or key not in data):  # else no other key can continue the path
        extra = _dotted(data, key)
        if extra is not None:  # merged into the one object there (both values kept), else one more object
            if len(objects) == 1:
                merged = dict(objects[0])
                for name, value in extra.items():
                    merged[name] = [merged[name], value] if name in merged else value
                objects = [merged]
            else:
                objects = [*objects, extra]
    return objects


_ABSENT = object()


class _Asked:
    """One match's indexes of values, by (object, key): each built once, however many leaves and `$or` branches
    ask about the same values."""

    __slots__ = ("scope", "_indexes", "_values")

    def __init__(self, scope: str):
        self.scope, self._indexes, self._values = scope, {}, {}

    def values(self, data, key: str) -> list:
        """`_values`, kept when it had an array to walk (a plain value costs less to read again)."""
        if isinstance(data, dict):
            value = data.get(key, _ABSENT)
            if value is _ABSENT:
                return []
            if not isinstance(value, list):
                return [value] if value_kind(value) is not None else []
        found = self._values.get((id(data), key))
        if found is None:
            found = self._values[(id(data), key)] = _values(data, key)
        return found

    def index(self, data, key: str, values: list) -> Index:
        found = self._indexes.get((id(data), key))
        if found is None:
            found = self._indexes[(id(data), key)] = Index(values)
        return found


def _failing(node: Node, data, asked: _Asked, prefix: str) -> str | None:
    """The first key (dotted path) of `node` that `data` fails, or None when it matches."""
    for kind, key, item in node.entries:
        if kind == "leaf":
            if not item.holds(asked.values(data, key), asked, data, key, asked.scope == BODY or bool(data)):
                return prefix + key
        elif kind == "nested":  # one object (of an array, at any depth) must match all of it
            first = None
            for obj in _objects(data, key, asked.scope) or [None]:
                failed = _failing(item, obj, asked, f"{prefix}{key}.")
                if failed is None:
                    break
                first = first or failed
            else:
                return first
        elif not any(_failing(branch, data, asked, prefix) is None for branch in item):
            return f"{prefix}{OR}"
    return None


_shapes: dict[int, tuple[dict, str, Node]] = {}
SHAPES_KEPT = 50_000  # as many as fanout.decoded keeps decoded policies


def _shape_of(policy: dict, scope: str) -> Node:
    """The tree of a stored policy, read once per decoded policy object."""
    entry = _shapes.get(id(policy))
    if entry is None or entry[0] is not policy or entry[1] != scope:
        if len(_shapes) >= SHAPES_KEPT:
            _shapes.clear()
        entry = _shapes[id(policy)] = (policy, scope, shape(policy, scope, strict=False))
    return entry[2]


def body_of(payload, payload_is_text: bool = False):
    """What a MessageBody policy filters on: the JSON payload (a text payload that parses as JSON counts)."""
    if not payload_is_text:
        return payload
    try:
        return json.loads(payload)
    except (TypeError, ValueError, RecursionError):
        return None


def failing_key(policy, attributes: dict, *, scope: str = ATTRIBUTES, body=None) -> str | None:
    """The first key whose conditions the message fails (an attribute name, or a dotted body path; `$or` when no
    branch matched), or None when it matches. `body`: the parsed payload, for the MessageBody scope."""
    if not policy:
        return None
    root = _shape_of(policy, scope)
    if scope == BODY and not isinstance(body, dict):  # a text that is no JSON object: never matched (as SNS)
        return next((key if kind != "or" else OR for kind, key, _ in root.entries), None)
    return _failing(root, body if scope == BODY else attributes, _Asked(scope), "")


def matches(policy, attributes: dict, *, scope: str = ATTRIBUTES, body=None) -> bool:
    return failing_key(policy, attributes, scope=scope, body=body) is None


# --- explanations -----------------------------------------------------------------------------------------------

def _conditions_at(node: Node, path: list[str]) -> list | None:
    """The conditions of the leaf at `path` (steps), wherever they are (in `$or` branches too); None if none."""
    found = []
    for kind, key, item in node.entries:
        if kind == "leaf" and len(path) == 1 and key == path[0]:
            found += item.conditions
        elif kind == "nested" and len(path) > 1 and key == path[0]:
            found += _conditions_at(item, path[1:]) or []
        elif kind == "or":
            for branch in item:
                found += _conditions_at(branch, path) or []
    return found or None


def _values_at(data, path: list[str], scope: str) -> list:
    """Every leaf value at `path` in `data` (through every object on the way)."""
    contexts = [data]
    for step in path[:-1]:
        contexts = [obj for context in contexts for obj in _objects(context, step, scope)]
    return [value for context in contexts for value in _values(context, path[-1])]


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
    try:
        root = shape(policy, scope, strict=False) if policy else None
    except FilterPolicyError:
        root = None
    path = _steps(key, scope)
    conditions = _conditions_at(root, path) if root is not None else None
    if conditions is None and path[-1] == OR:
        return f"the message matches none of the {OR} branches of the filter policy"
    if scope == BODY and not isinstance(body, dict):
        return "the message's body is not a JSON object, so no body key can match"
    if scope != BODY and not attributes and {"exists": False} in conditions:
        return (f"the message has no attributes; attribute {key!r} is missing, but exists: false matches only a "
                f"message with attributes (as SNS)")
    if conditions is None:
        return f"the filter policy's rules for {noun} {key!r} did not match (the policy has changed since)"
    rules = json.dumps(conditions, ensure_ascii=False)
    values = _values_at(body if scope == BODY else attributes, path, scope)
    if not values:
        return f"{noun} {key!r} is missing; the filter policy requires {rules}"
    shown = json.dumps(values[0] if len(values) == 1 else values, ensure_ascii=False)
    if len(shown) > 200:
        shown = shown[:200] + "…"
    return f"{noun} {key!r} is {shown}, which meets none of {rules}"

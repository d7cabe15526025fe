"""Does a message match a filter policy, and if not, which key does it fail first (pure; no Django)?

Matching walks the message along the policy's tree (reading.shape, read once per decoded policy): a leaf holds when
one of its conditions holds for one of the key's values; a nested node over an array of objects matches when one
object matches all of it (arrays of arrays included), so two keys of one object are matched in the same element;
`$or` when one branch does. A key's values are asked one by one when they are few, else through their index
(index.Index, built once per key and message however many conditions and `$or` branches ask).
"""

from delivery.rules.filters import payload
from delivery.rules.filters.conditions import holds_prepared, holds_prepared_indexed
from delivery.rules.filters.index import Index
from delivery.rules.filters.reading import ATTRIBUTES, BODY, OR, Leaf, Node, shape
from delivery.rules.filters.values import value_kind

EVENT_TYPE_KEY = "(event type)"  # how a failed event-type filter is recorded among the failing keys
INDEX_AT = 64  # values × conditions beyond which a key's values are indexed rather than checked one by one
SHAPES_KEPT = 50_000  # as many as fanout.decoded keeps decoded policies

_ABSENT = object()
_shapes: dict[int, tuple[dict, str, Node]] = {}


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


class _Asked:
    """One match's values and indexes of values, by (object, key): each built once, however many leaves and `$or`
    branches ask about the same values."""

    __slots__ = ("scope", "_indexes", "_values")

    def __init__(self, scope: str):
        self.scope, self._indexes, self._values = scope, {}, {}

    def holds(self, leaf: Leaf, data, key: str, absent_counts: bool) -> bool:
        """Do the leaf's conditions hold for the values `data` holds at `key`?"""
        values = self.values(data, key)
        if len(values) * len(leaf.asks) <= INDEX_AT:
            return holds_prepared(leaf.asks, values, absent_counts)
        return holds_prepared_indexed(leaf.asks, self.index(data, key, values), absent_counts)

    def values(self, data, key: str) -> list:
        """`payload.values`, kept when it had an array to walk (a plain value costs less to read again)."""
        if isinstance(data, dict):
            value = data.get(key, _ABSENT)
            if value is _ABSENT:
                return []
            if not isinstance(value, list):
                return [value] if value_kind(value) is not None else []
        found = self._values.get((id(data), key))
        if found is None:
            found = self._values[(id(data), key)] = payload.values(data, key)
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
            if not asked.holds(item, data, key, asked.scope == BODY or bool(data)):
                return prefix + key
        elif kind == "nested":  # one object (of an array, at any depth) must match all of it
            first = None
            for obj in payload.objects(data, key, asked.scope) or [None]:
                failed = _failing(item, obj, asked, f"{prefix}{key}.")
                if failed is None:
                    break
                first = first or failed
            else:
                return first
        elif not any(_failing(branch, data, asked, prefix) is None for branch in item):
            return f"{prefix}{OR}"
    return None


def _shape_of(policy: dict, scope: str) -> Node:
    """The tree of a stored policy, read once per decoded policy object."""
    entry = _shapes.get(id(policy))
    if entry is None or entry[0] is not policy or entry[1] != scope:
        if len(_shapes) >= SHAPES_KEPT:
            _shapes.clear()
        entry = _shapes[id(policy)] = (policy, scope, shape(policy, scope, strict=False))
    return entry[2]

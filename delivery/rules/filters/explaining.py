"""Why a message did not match its subscription's filters, in words (pure; no Django): the failing key, its value
and the conditions it did not meet (the fan-out report shows it)."""

import json

from delivery.rules.filters import payload
from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.matching import EVENT_TYPE_KEY, failing_key
from delivery.rules.filters.reading import ATTRIBUTES, BODY, OR, Node, shape, steps


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
    path = steps(key, scope)
    conditions = _conditions_at(root, path) if root is not None else None
    if conditions is None and path[-1] == OR:
        return f"the message matches none of the {OR} branches of the filter policy"
    if scope == BODY and not isinstance(body, dict):
        return "the message's body is not a JSON object, so no body key can match"
    if scope != BODY and not attributes and conditions is not None and {"exists": False} in conditions:
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
        contexts = [obj for context in contexts for obj in payload.objects(context, step, scope)]
    return [value for context in contexts for value in payload.values(context, path[-1])]

"""What a message holds at one step of a policy's path (pure; no Django): its leaf values and its objects.

An array's elements count at any depth (arrays of arrays included); the payload's own dotted keys continue a path
(`{"store.city": "Seattle"}` holds "Seattle" at store, city). Loops, not recursions: a text message's JSON is as deep
as its sender made it. `body_of` is what a MessageBody policy filters on.
"""

import json

from delivery.rules.filters.reading import BODY
from delivery.rules.filters.values import value_kind


def body_of(payload, payload_is_text: bool = False):
    """What a MessageBody policy filters on: the JSON payload (a text payload that parses as JSON counts)."""
    if not payload_is_text:
        return payload
    try:
        return json.loads(payload)
    except (TypeError, ValueError, RecursionError):
        return None


def values(data, key: str) -> list:
    """The leaf values `data` (an object, or None) holds at one step `key`."""
    if not isinstance(data, dict) or key not in data:
        return []
    value = data[key]
    if not isinstance(value, list):
        return [value] if value_kind(value) is not None else []
    return _leaves_of(value, [])


def objects(data, key: str, scope: str) -> list:
    """The objects `data` holds at one step `key` (the payload's dotted keys continuing the path among them)."""
    if not isinstance(data, dict):
        return []
    found = _objects_of(data[key], []) if key in data else []
    if scope == BODY and (len(data) > 1 or key not in data):  # else no other key can continue the path
        extra = _dotted(data, key)
        if extra is not None:  # merged into the one object there (both values kept), else one more object
            if len(found) == 1:
                merged = dict(found[0])
                for name, value in extra.items():
                    merged[name] = [merged[name], value] if name in merged else value
                found = [merged]
            else:
                found = [*found, extra]
    return found


def _leaves_of(value, into: list) -> list:
    """The leaf values of a value: itself, or an array's elements at any depth; objects are none."""
    return _flattened(value, lambda item: value_kind(item) is not None, into)


def _objects_of(value, into: list) -> list:
    """The objects of a value: itself, or an array's objects at any depth (arrays of arrays included)."""
    return _flattened(value, lambda item: isinstance(item, dict), into)


def _flattened(value, kept, into: list) -> list:
    """What of `value` (itself, or an array's items at any depth, in order) `kept` keeps, added to `into`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif kept(item):
            into.append(item)
    return into


def _dotted(data: dict, key: str) -> dict | None:
    """The payload's own dotted keys under `key` as an object: {"a.b": 1} read at `a` is {"b": 1}."""
    prefix = key + "."
    found = {name[len(prefix):]: value for name, value in data.items()
             if isinstance(name, str) and name.startswith(prefix)}
    return found or None

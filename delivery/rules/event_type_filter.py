"""Event-type filters (pure; no Django): a subscription's list of event types, exact or with `*` wildcards
(`order.*` matches `order.created` and `order.item.added`); an empty list matches every event type. Matched with
the filter policies' linear wildcard matcher (filters/operators/wildcard.py), without their escapes: in an
event type a star is a star."""

from functools import lru_cache

from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.operators.wildcard import wildcard_matches

MAX_EVENT_TYPES = 25


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
    return wildcard_matches(tuple(pattern.split("*")), text)  # event types have no escapes: a star is a star


def event_type_matches(patterns, event_type: str) -> bool:
    """Does `event_type` match one of the patterns (exact, or `*` for any run of characters)? No patterns: yes."""
    if not patterns:
        return True
    return any(glob_matches(p, event_type) for p in patterns)

"""Wildcard patterns (pure; no Django): `*` stands for any run of characters, at most three per pattern, matched
in linear time without backtracking. Event-type filters (delivery/rules/event_type_filter.py) use the same
matcher, without the escapes."""

from functools import lru_cache

from delivery.rules.filters.index import starting
from delivery.rules.filters.operators.base import Operator

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
        return starting(index.strings, pieces[0])
    if pieces[-1]:
        return [text[::-1] for text in starting(index.reversed_strings, pieces[-1][::-1])]
    return index.strings


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


WILDCARD = Wildcard()  # the one instance: OPERATORS' and anything-but's

"""Anything but some values, or but a prefix, a suffix or a wildcard pattern (pure; no Django)."""

from delivery.rules.filters.index import all_start
from delivery.rules.filters.operators.base import Operator, non_empty_string
from delivery.rules.filters.operators.wildcard import WILDCARD, wildcard_matches, wildcard_pieces
from delivery.rules.filters.values import identity, is_number, number_problem


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
            problem = WILDCARD.problem(value) if kind == "wildcard" else non_empty_string(value)
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
                return not all_start(index.strings, affix)
            return not all_start(index.reversed_strings, affix[::-1])
        excluded = {identity(item) for item in (argument if isinstance(argument, list) else [argument])}
        candidates = index.identities - {("null", None)}
        return len(candidates) > sum(1 for item in excluded if item in candidates)  # one is not excluded

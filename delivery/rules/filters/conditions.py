"""One condition of a filter policy (pure; no Django): a plain value (EXACT) or `{name: argument}` for one of
OPERATORS; what is wrong with it, and whether a key's conditions hold for its values.

Two ways to ask, with the same answers: one by one (each operator's `one`, each value; the cheaper way for a value
or two) and through the values' index (`any_in`: many values at once).
"""

import json

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.anything_but import AnythingBut
from delivery.rules.filters.operators.base import Operator
from delivery.rules.filters.operators.cidr import Cidr
from delivery.rules.filters.operators.exact import Exact
from delivery.rules.filters.operators.exists import Exists
from delivery.rules.filters.operators.numeric import Numeric
from delivery.rules.filters.operators.strings import EqualsIgnoreCase, Prefix, Suffix
from delivery.rules.filters.operators.wildcard import WILDCARD
from delivery.rules.filters.values import has_value

EXACT = Exact()
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
    """`holds_indexed` of conditions already `prepared`."""
    for op, argument in asks:
        try:
            if op.presence and not (index.present or absent_counts):
                continue
            if op.any_in(argument, index):
                return True
        except UNASKABLE:
            continue
    return False

"""A plain value as a condition (pure; no Django): equal to it."""

from delivery.rules.filters.operators.base import Operator
from delivery.rules.filters.values import finite, identity, is_number, number_problem, scaled, value_kind


class Exact(Operator):
    """A plain value: equal to it ("String value matching", "Numeric value matching": exact). A string, a number
    within ±1e9, true, false or null ("Filter policy constraints": the JSON may hold strings, numbers and the
    keywords true, false and null); numbers compare to five digits after the decimal point, `true` never equals 1."""

    name = "(exact)"

    def problem(self, argument):
        if is_number(argument):
            return number_problem(argument)
        if value_kind(argument) is None:
            return "must be a string, a number, true, false, null or an operator object such as {\"prefix\": \"a\"}"
        return None

    def one(self, argument, value):
        if isinstance(argument, str):
            return isinstance(value, str) and value == argument
        if argument is None or isinstance(argument, bool):
            return value is argument  # None, True and False are each one object
        return is_number(value) and finite(value) and scaled(value) == scaled(argument)

    def any_in(self, argument, index):
        return identity(argument) in index.identities

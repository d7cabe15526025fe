"""The string operators that compare a whole string or its ends (pure; no Django): prefix, suffix,
equals-ignore-case ("String value matching"). A string condition never matches a number."""

from delivery.rules.filters.index import starts
from delivery.rules.filters.operators.base import Operator, non_empty_string


class Prefix(Operator):
    """{"prefix": "eu-"} ("String value matching": prefix)."""

    name = "prefix"
    problem = staticmethod(non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.startswith(argument)

    def any_in(self, argument, index):
        return starts(index.strings, argument)


class Suffix(Operator):
    """{"suffix": ".png"} ("String value matching": suffix)."""

    name = "suffix"
    problem = staticmethod(non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.endswith(argument)

    def any_in(self, argument, index):
        return starts(index.reversed_strings, argument[::-1])


class EqualsIgnoreCase(Operator):
    """{"equals-ignore-case": "RUGBY"} ("String value matching": equals-ignore-case)."""

    name = "equals-ignore-case"
    problem = staticmethod(non_empty_string)

    def one(self, argument, value):
        return isinstance(value, str) and value.casefold() == argument.casefold()

    def any_in(self, argument, index):
        return argument.casefold() in index.folded

"""What an operator is (pure; no Django): a class with a `name`, `problem`, `one` and `any_in`.

`problem` says what is wrong with its argument (the caller names where), `one` is its meaning for one argument and
one value, written plainly, and `any_in` is the same question asked of many values at once, through their
`index.Index`, in a few steps. tests/delivery/rules/filters/test_conditions.py compares `any_in` with `one` over
every pair and triple of a pool of conditions. SNS's documentation page each operator comes from is named on its
class (docs/filtering.md has the table).
"""

from delivery.rules.filters.index import Index


class Operator:
    """One operator; subclasses set `name` and define `problem`, `one` and `any_in`."""

    name = ""
    presence = False  # decides on whether the key has a value at all (exists), not on the values

    def problem(self, argument) -> str | None:
        raise NotImplementedError

    def one(self, argument, value) -> bool:
        """Does this operator with `argument` hold for one leaf value?"""
        raise NotImplementedError

    def any_in(self, argument, index: Index) -> bool:
        """Does it hold for any of the indexed values? (`one` for each value, in a few steps.)"""
        raise NotImplementedError


def non_empty_string(argument) -> str | None:
    """The check of an argument that must be a non-empty string (prefix, suffix, equals-ignore-case, ...)."""
    return None if isinstance(argument, str) and argument else "must be a non-empty string"

"""A key's leaf values, indexed for the operators to ask about many at once (pure; no Django).

Each operator's `any_in` asks the values' `Index` (sorted strings, numbers and addresses, sets of identities) in
about logarithmic time: so a key's cost against a 26,000-element array is indexing the array once, then a few steps
per condition, however many conditions (and `$or` branches) ask about it. The helpers below ask a sorted list of
strings about a prefix (a suffix is a prefix of the reversed strings).
"""

import bisect
from functools import cached_property

from delivery.rules.filters.values import address, finite, has_value, identity, is_number, scaled


class Index:
    """A key's leaf values, indexed for conditions to ask about them: each structure is built once, when the first
    condition needs it, in one pass (and a sort) over the values."""

    def __init__(self, values: list):
        self.values = values

    @cached_property
    def present(self) -> bool:  # a key exists when it has a value other than null ("Key matching")
        return has_value(self.values)

    @cached_property
    def identities(self) -> set:
        return {identity(value) for value in self.values}

    @cached_property
    def others(self) -> set:
        """Identities of the values that are neither null nor strings (what no string condition can exclude)."""
        return {i for i in self.identities if i[0] not in ("string", "null")}

    @cached_property
    def strings(self) -> list[str]:
        return sorted({value for value in self.values if isinstance(value, str)})

    @cached_property
    def reversed_strings(self) -> list[str]:
        return sorted(value[::-1] for value in self.strings)

    @cached_property
    def folded(self) -> set[str]:
        return {value.casefold() for value in self.strings}

    @cached_property
    def numbers(self) -> list[int]:
        return sorted({scaled(value) for value in self.values if is_number(value) and finite(value)})

    @cached_property
    def addresses(self) -> dict[int, list[int]]:
        found: dict[int, set[int]] = {4: set(), 6: set()}
        for value in self.strings:
            parsed = address(value)
            if parsed is not None:
                found[parsed.version].add(int(parsed))
        return {version: sorted(numbers) for version, numbers in found.items()}


def starts(ordered: list[str], prefix: str) -> bool:
    """Does a sorted list hold a string starting with `prefix`? (They sit together, from where it would go.)"""
    at = bisect.bisect_left(ordered, prefix)
    return at < len(ordered) and ordered[at].startswith(prefix)


def all_start(ordered: list[str], prefix: str) -> bool:
    """Does every string of a sorted list start with `prefix`? (Then the first and the last do.)"""
    return not ordered or (ordered[0].startswith(prefix) and ordered[-1].startswith(prefix))


def starting(ordered: list[str], prefix: str) -> list[str]:
    """The strings of a sorted list that start with `prefix` (they sit together, from where it would go)."""
    start = end = bisect.bisect_left(ordered, prefix)
    while end < len(ordered) and ordered[end].startswith(prefix):
        end += 1
    return ordered[start:end]

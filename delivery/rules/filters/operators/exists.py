"""Whether a key has a value (pure; no Django)."""

from delivery.rules.filters.operators.base import Operator


class Exists(Operator):
    """{"exists": true|false}: the key has a value, or has none ("Key matching"). Only leaves exist (an object, an
    empty array are none), and a null is no value."""

    name = "exists"
    presence = True

    def problem(self, argument):
        return None if isinstance(argument, bool) else "must be true or false"

    def one(self, argument, value):  # asked with the key's presence as the value
        return value is argument

    def any_in(self, argument, index):
        return index.present is argument

"""Reading a delivery policy's fields (pure; no Django): each checked for its type and bounds, every error kept
with its field path (`healthyRetryPolicy.numRetries`, "must be at most 100"), so that a policy reports all its
errors at once and is never stored half valid."""

import math


class Checker:
    """Reads a document's fields, keeping every error as (field path, reason) and answering the default for a
    field in error, so that one pass reports them all."""

    def __init__(self):
        self.errors: list[tuple[str, str]] = []

    def fail(self, path: str, reason: str):
        self.errors.append((path, reason))

    def section(self, doc: dict, key: str, allowed: tuple[str, ...]) -> dict:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            self.fail(key, "must be an object")
            return {}
        for unknown in sorted(set(value) - set(allowed)):
            self.fail(f"{key}.{unknown}", "unknown field")
        return value

    def integer(self, section: dict, path: str, key: str, default, low=None, high=None):
        value = section.get(key, default)
        if value is None:
            return self._null(path, key, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{path}.{key}" if path else key, "must be a whole number")
            return default
        return self._bounded(value, f"{path}.{key}" if path else key, low, high)

    def number(self, section: dict, path: str, key: str, default, low=None, high=None):
        value = section.get(key, default)
        if value is None:
            return self._null(path, key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(f"{path}.{key}" if path else key, "must be a number")
            return default
        return self._bounded(value, f"{path}.{key}" if path else key, low, high)

    def _null(self, path: str, key: str, default):
        """`null` means "not set" only where not setting is allowed (no default); elsewhere it is a wrong type."""
        if default is not None:
            self.fail(f"{path}.{key}" if path else key, "must not be null")
        return default

    def _bounded(self, value, path, low, high):
        if low is not None and value < low:
            self.fail(path, f"must be at least {low}")
        elif high is not None and value > high:
            self.fail(path, f"must be at most {high}")
        return value

"""A subscription's filters, as the rest of Herald asks about them (pure; no Django): the one module of this
package that code outside it imports.

    validate, problems     is a filter policy one SNS accepts (problems: both filters, by field, for every door)
    failing_key, matches   does a message match; the first key it fails (EVENT_TYPE_KEY: its event type)
    body_of, explain       what a MessageBody policy filters on; why a message did not match, in words
    SCOPES, ATTRIBUTES, BODY, FilterPolicyError, combinations, leaf_keys

Each is defined where its concept lives (this package's docstring lists them); `validate` and `problems` here.
Event-type filters, the simpler field beside a policy, are delivery/rules/event_type_filter.py.
"""

from delivery.rules.event_type_filter import validate_event_types
from delivery.rules.filters import limits
from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.explaining import explain
from delivery.rules.filters.limits import combinations, leaf_keys
from delivery.rules.filters.matching import EVENT_TYPE_KEY, failing_key, matches
from delivery.rules.filters.payload import body_of
from delivery.rules.filters.reading import ATTRIBUTES, BODY, SCOPES, shape

__all__ = ["ATTRIBUTES", "BODY", "EVENT_TYPE_KEY", "SCOPES", "FilterPolicyError", "body_of", "combinations",
           "explain", "failing_key", "leaf_keys", "matches", "problems", "validate"]


def validate(policy, scope: str = ATTRIBUTES) -> None:
    """Raise FilterPolicyError unless `policy` is a policy SNS accepts for `scope`."""
    if scope not in SCOPES:
        raise FilterPolicyError(f"filter_policy_scope must be one of {', '.join(SCOPES)}")
    if policy in (None, {}):
        return
    if not isinstance(policy, dict):
        raise FilterPolicyError("must be an object mapping keys to lists of conditions")
    limits.check_size(policy)
    limits.check(shape(policy, scope))


def problems(*, policy=None, scope: str = ATTRIBUTES, event_types=None) -> dict[str, str]:
    """What is wrong with a subscription's filters, by field (`filter_policy`, `event_types`); empty when nothing.
    The subscription service asks this for every door."""
    found = {}
    for name, check in (("filter_policy", lambda: validate(policy, scope)),
                        ("event_types", lambda: validate_event_types(event_types))):
        try:
            check()
        except FilterPolicyError as exc:
            found[name] = str(exc)
    return found

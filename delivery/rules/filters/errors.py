"""The one refusal of a filter (pure; no Django): a filter policy SNS would refuse, or an event-type filter Herald
does; `problems` in policy.py turns it into the field's error."""


class FilterPolicyError(ValueError):
    """A policy SNS would refuse; the text names the offending part (`region[1]`, `$or[0].size`)."""

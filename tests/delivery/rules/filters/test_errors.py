"""The one refusal of a filter (pure): both filters raise it, so a subscription's problems are read by field."""

import pytest

from delivery.rules.event_type_filter import validate_event_types
from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.policy import validate


@pytest.mark.parametrize("check, text", [
    (lambda: validate({"region": ["eu", {"prefix": ""}]}), "region[1].prefix: must be a non-empty string"),
    (lambda: validate({"$or": [{"size": [{"numeric": [">"]}]}, {"b": ["x"]}]}),
     "$or[0].size[0].numeric: must be one or two comparisons, such as [\"=\", 5] or [\">\", 0, \"<=\", 150]"),
    (lambda: validate_event_types(["order.*", ""]), "[1]: must be an event type of 1 to 256 characters, such as "
                                                   "order.* "),
])
def test_a_refusal_names_the_offending_part(check, text):
    with pytest.raises(FilterPolicyError) as refused:
        check()
    assert str(refused.value) == text
    assert isinstance(refused.value, ValueError)  # what a caller that reads input errors catches

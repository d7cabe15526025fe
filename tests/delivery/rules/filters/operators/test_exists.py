"""exists (pure): whether a key has a value; a null is none."""

import pytest

from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.exists import Exists

EXISTS = Exists()


def test_it_takes_true_or_false():
    assert EXISTS.problem(True) is None
    assert EXISTS.problem(False) is None
    assert EXISTS.problem("yes") == "must be true or false"
    assert EXISTS.problem(1) == "must be true or false"


@pytest.mark.parametrize("values, present", [
    (["a"], True), ([0], True), ([False], True), ([None, "a"], True), ([None], False), ([], False),
])
def test_a_key_exists_when_it_has_a_value_other_than_null(values, present):
    assert EXISTS.any_in(True, Index(values)) is present
    assert EXISTS.any_in(False, Index(values)) is not present
    assert EXISTS.one(True, present) is present  # asked with the key's presence as the value
    assert EXISTS.one(False, present) is not present

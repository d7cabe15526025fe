"""What an operator is (pure): every operator of OPERATORS completes the contract, and the contract alone
decides nothing."""

import pytest

from delivery.rules.filters.conditions import EXACT, OPERATORS
from delivery.rules.filters.index import Index
from delivery.rules.filters.operators.base import Operator, non_empty_string


@pytest.mark.parametrize("op", [EXACT, *OPERATORS.values()], ids=lambda op: op.name)
def test_every_operator_defines_its_check_its_meaning_and_its_indexed_meaning(op):
    assert isinstance(op, Operator) and op.name
    for method in ("problem", "one", "any_in"):
        assert getattr(type(op), method) is not getattr(Operator, method), (op.name, method)


def test_only_exists_decides_on_presence():
    assert [name for name, op in OPERATORS.items() if op.presence] == ["exists"]
    assert EXACT.presence is False


def test_the_contract_alone_decides_nothing():
    with pytest.raises(NotImplementedError):
        Operator().problem("x")
    with pytest.raises(NotImplementedError):
        Operator().one("x", "x")
    with pytest.raises(NotImplementedError):
        Operator().any_in("x", Index(["x"]))


@pytest.mark.parametrize("argument, problem", [
    ("a", None), ("", "must be a non-empty string"), (3, "must be a non-empty string"),
    (["a"], "must be a non-empty string"),
])
def test_non_empty_string(argument, problem):
    assert non_empty_string(argument) == problem

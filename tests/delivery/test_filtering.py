import pytest

from delivery.rules.filter_policy import FilterPolicyError, matches, validate


@pytest.mark.parametrize("policy, attributes, expected", [
    (None, {}, True),
    ({"region": ["eu", "us"]}, {"region": "eu"}, True),
    ({"region": ["eu"]}, {"region": "apac"}, False),
    ({"region": ["eu"]}, {}, False),
    ({"size": [3]}, {"size": 3}, True),
    ({"kind": [{"prefix": "order."}]}, {"kind": "order.created"}, True),
    ({"kind": [{"anything-but": ["test"]}]}, {"kind": "test"}, False),
    ({"kind": [{"anything-but": ["test"]}]}, {"kind": "live"}, True),
    ({"trace": [{"exists": False}]}, {}, True),
    ({"trace": [{"exists": True}]}, {}, False),
    ({"price": [{"numeric": [">", 10, "<=", 20]}]}, {"price": 20}, True),
    ({"price": [{"numeric": [">", 10, "<=", 20]}]}, {"price": 10}, False),
    ({"a": ["1"], "b": ["2"]}, {"a": "1", "b": "3"}, False),
])
def test_matching(policy, attributes, expected):
    assert matches(policy, attributes) is expected


@pytest.mark.parametrize("policy", [[1], {"a": []}, {"a": "x"}, {"a": [{"regex": "."}]},
                                    {"a": [{"numeric": [">"]}]}, {"a": [True]}])
def test_invalid_policies(policy):
    with pytest.raises(FilterPolicyError):
        validate(policy)

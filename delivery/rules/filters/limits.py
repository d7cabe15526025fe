"""SNS's limits on a filter policy, as SNS counts them ("Filter policy constraints"; pure, no Django): at most 5
keys (leaf paths, across nesting and `$or` branches), at most 150 combinations (each key's number of conditions
times its depth in the policy, multiplied across keys, `$or` branches adding up), 256 KiB of JSON; and Herald's
own bound on wildcard conditions. Every refusal says what it counted."""

import json

from delivery.rules.filters.conditions import wildcard_count
from delivery.rules.filters.errors import FilterPolicyError
from delivery.rules.filters.reading import BODY, OR, Node, shape

MAX_KEYS = 5
MAX_COMBINATIONS = 150
MAX_WILDCARD_CONDITIONS = 5  # Herald's bound on the cost of wildcards (SNS bounds them by complexity points)
MAX_POLICY_BYTES = 256 * 1024


def leaf_keys(policy: dict, scope: str = BODY) -> set[str]:
    """Every key that holds conditions, as a dotted path (the keys SNS's limit counts)."""
    return _leaf_paths(shape(policy, scope), "")


def combinations(policy: dict, scope: str = BODY) -> int:
    """SNS's count: each key's number of conditions times its depth, multiplied across keys; `$or` branches add
    up. (A flat policy's is the product of its keys' numbers of conditions.)"""
    return _count(shape(policy, scope), 1)[0]


def check_size(policy: dict) -> None:
    """Raise FilterPolicyError for a policy that is no JSON, or larger than MAX_POLICY_BYTES."""
    try:
        size = len(json.dumps(policy, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        raise FilterPolicyError("must be JSON: an object of keys (strings) to lists of conditions") from None
    if size > MAX_POLICY_BYTES:
        raise FilterPolicyError(f"is larger than {MAX_POLICY_BYTES // 1024} KiB")


def check(root: Node) -> None:
    """Raise FilterPolicyError for a policy's tree past a limit: its keys, wildcard conditions, combinations."""
    keys = sorted(_leaf_paths(root, ""))
    if len(keys) > MAX_KEYS:
        raise FilterPolicyError(f"has {len(keys)} keys ({', '.join(keys)}); at most {MAX_KEYS} are allowed")
    patterns = sum(wildcard_count(c) for c in _all_conditions(root))
    if patterns > MAX_WILDCARD_CONDITIONS:
        raise FilterPolicyError(f"has {patterns} wildcard conditions; at most {MAX_WILDCARD_CONDITIONS} are allowed "
                                f"(each is matched against every string of a value, so their number is bounded)")
    total, terms = _count(root, 1)
    if total > MAX_COMBINATIONS:
        raise FilterPolicyError(f"has {total} combinations ({' × '.join(terms)}); at most {MAX_COMBINATIONS} are "
                                f"allowed (SNS counts each key's conditions times its depth)")


def _leaf_paths(node: Node, prefix: str) -> set[str]:
    keys = set()
    for kind, key, item in node.entries:
        if kind == "leaf":
            keys.add(prefix + key)
        elif kind == "nested":
            keys |= _leaf_paths(item, f"{prefix}{key}.")
        else:
            for branch in item:
                keys |= _leaf_paths(branch, prefix)
    return keys


def _count(node: Node, depth: int) -> tuple[int, list[str]]:
    """(combinations, the terms they are made of) of a node whose keys are at `depth` (1 at the top)."""
    total, terms = 1, []
    for kind, key, item in node.entries:
        if kind == "leaf":
            n = len(item.conditions)
            total *= depth * n
            terms.append(f"{key} {n}" if depth == 1 else f"{key} {n} × depth {depth}")
        elif kind == "nested":
            inner = _count(item, depth + 1)[0]
            total *= inner
            terms.append(f"{key}.… {inner}")
        else:
            inner = sum(_count(branch, depth)[0] for branch in item)
            total *= inner
            terms.append(f"{OR} {inner}")
    return total, terms


def _all_conditions(node: Node) -> list:
    found = []
    for kind, _, item in node.entries:
        if kind == "leaf":
            found += item.conditions
        elif kind == "nested":
            found += _all_conditions(item)
        else:
            for branch in item:
                found += _all_conditions(branch)
    return found

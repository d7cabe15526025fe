"""Filter policies over message attributes, SNS style (pure; no Django).

A policy maps attribute names to a list of allowed values; a message matches when every named attribute matches
one of its values. Values may be strings, numbers, or {"prefix": "..."}, {"anything-but": [...]},
{"exists": bool}, {"numeric": [">", 10, "<=", 20]}.
"""

import json
import math
import operator

NUMERIC_OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class FilterPolicyError(ValueError):
    pass


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate(policy) -> None:
    if policy in (None, {}):
        return
    if not isinstance(policy, dict):
        raise FilterPolicyError("must be an object mapping attribute names to lists of allowed values")
    for name, rules in policy.items():
        if not isinstance(rules, list) or not rules:
            raise FilterPolicyError(f"{name}: must be a non-empty list of allowed values")
        for rule in rules:
            if isinstance(rule, dict):
                if len(rule) != 1 or next(iter(rule)) not in {"prefix", "anything-but", "exists", "numeric"}:
                    raise FilterPolicyError(f"{name}: unknown rule {rule!r}")
                if "numeric" in rule:
                    terms = rule["numeric"]
                    if (not isinstance(terms, list) or not terms or len(terms) % 2 or not all(
                            isinstance(terms[i], str) and terms[i] in NUMERIC_OPS and _finite(terms[i + 1])
                            for i in range(0, len(terms), 2))):
                        raise FilterPolicyError(f"{name}: numeric takes pairs like ['>', 10, '<=', 20]")
            elif not isinstance(rule, (str, int, float)) or isinstance(rule, bool):
                raise FilterPolicyError(f"{name}: values must be strings, numbers or rule objects")


def _rule_matches(rule, present: bool, value) -> bool:
    if isinstance(rule, dict):
        (kind, arg), = rule.items()
        if kind == "exists":
            return present is bool(arg)
        if not present:
            return False
        if kind == "prefix":
            return isinstance(value, str) and value.startswith(str(arg))
        if kind == "anything-but":
            excluded = arg if isinstance(arg, list) else [arg]
            return value not in excluded
        if kind == "numeric":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False
            return all(NUMERIC_OPS[arg[i]](value, arg[i + 1]) for i in range(0, len(arg), 2))
        return False
    return present and value == rule


def failing_key(policy, attributes: dict) -> str | None:
    """The first attribute whose rules the message fails, or None when it matches."""
    if not policy:
        return None
    for name, rules in policy.items():
        present = name in attributes
        if not any(_rule_matches(rule, present, attributes.get(name)) for rule in rules):
            return name
    return None


def matches(policy, attributes: dict) -> bool:
    return failing_key(policy, attributes) is None


def explain(policy, attributes: dict, key: str | None = None) -> str:
    """Why a message fails a policy, in words: the failing attribute (`key`, else the first), its value and the
    rules it did not meet."""
    key = key if key is not None else failing_key(policy, attributes)
    if key is None:
        return "the message matches the filter policy"
    if key not in (policy or {}):
        return f"the filter policy's rules for attribute {key!r} did not match (the policy has changed since)"
    rules = json.dumps(policy[key], ensure_ascii=False)
    if key not in attributes:
        return f"attribute {key!r} is missing; the filter policy requires {rules}"
    value = json.dumps(attributes[key], ensure_ascii=False)
    if len(value) > 200:
        value = value[:200] + "…"
    return f"attribute {key!r} is {value}, which meets none of {rules}"

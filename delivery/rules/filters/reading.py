"""A filter policy read into a tree, once per decoded policy (pure; no Django).

A policy maps keys to a list of conditions; a message matches when every key matches one of its conditions. With
scope `MessageAttributes` (the default) the keys are the message's attributes; with `MessageBody` they are paths
into the JSON payload: a key may hold a nested policy for a nested object, and a dotted key is a path
(`{"store.city": [...]}` is `{"store": {"city": [...]}}`). `$or` holds a list of at least two policies of which
one must match ("AND/OR logic").

`shape` reads a policy into a tree: a node holds leaf keys (a key's conditions), nested nodes (body scope) and `$or`
branches. Read strictly, it refuses what SNS would, naming the part (FilterPolicyError); a stored policy is read as
it is (checked when it was written).
"""

from delivery.rules.filters.conditions import OPERATORS, condition_problem, prepared
from delivery.rules.filters.errors import FilterPolicyError
from subscriptions.states import FILTER_SCOPES

SCOPES = FILTER_SCOPES
ATTRIBUTES, BODY = SCOPES
OR = "$or"
MAX_DEPTH = 10


class Node:
    """One object of a policy: its entries in the policy's order, each ("leaf", key, Leaf), ("nested", key, Node)
    or ("or", None, [Node, …]); a key is one step of a path (a body policy's dotted keys are split into steps and
    the steps they share are one nested node; an attribute name is one step)."""

    __slots__ = ("entries", "_nested")

    def __init__(self):
        self.entries: list[tuple] = []
        self._nested: dict[str, Node] = {}

    def child(self, key: str) -> "Node":
        if key not in self._nested:
            self._nested[key] = Node()
            self.entries.append(("nested", key, self._nested[key]))
        return self._nested[key]

    def leaf(self, key: str, conditions: list) -> None:
        self.entries.append(("leaf", key, Leaf(conditions)))

    def either(self, branches: list["Node"]) -> None:
        self.entries.append(("or", None, branches))


class Leaf:
    """A key's conditions, and each one's (operator, argument), read once (conditions.prepared)."""

    __slots__ = ("conditions", "asks")

    def __init__(self, conditions: list):
        self.conditions, self.asks = conditions, prepared(conditions)


def is_or(key, value) -> bool:
    """SNS reads `$or` as an operator only when it holds a list of at least two objects none of whose keys is an
    operator's name; otherwise `$or` is a key like any other ("AND/OR logic": OR operator)."""
    return (key == OR and isinstance(value, list) and len(value) >= 2
            and all(isinstance(b, dict) and not (b.keys() & OPERATORS.keys()) for b in value))


def steps(key: str, scope: str) -> list[str]:
    """A key's steps: a body key's dotted path, an attribute's name whole."""
    return key.split(".") if scope == BODY else [key]


def shape(policy, scope: str = ATTRIBUTES, *, strict: bool = True) -> Node:
    """The policy's tree (checked unless not `strict`); raises FilterPolicyError for one SNS would refuse."""
    if scope not in SCOPES:
        raise FilterPolicyError(f"filter_policy_scope must be one of {', '.join(SCOPES)}")
    if not isinstance(policy, dict):
        raise FilterPolicyError("must be an object mapping keys to lists of conditions")
    root = Node()
    _read(policy, scope, "", root, 1, strict)
    return root


def _read(policy: dict, scope: str, where: str, node: Node, depth: int, strict: bool = True) -> None:
    """Read `policy` into `node`, checking it (`strict`); FilterPolicyError names the first part SNS would refuse.
    Not strict: a stored policy, checked when it was written, is read as it is, also one written before a rule
    was added (a number over 1e9), so that a publish never fails on it."""
    if not strict:
        pass
    elif depth > MAX_DEPTH:
        raise FilterPolicyError(f"{where or 'the policy'}: nested more than {MAX_DEPTH} levels deep")
    elif not policy:
        raise FilterPolicyError(f"{where or 'the policy'}: must not be empty")
    for key, value in policy.items():
        here = f"{where}.{key}" if where else key
        if is_or(key, value):
            branches = []
            for n, branch in enumerate(value):
                branches.append(Node())
                _read(branch, scope, f"{here}[{n}]", branches[-1], depth + 1, strict)
            node.either(branches)
            continue
        if strict:
            _check_key(key, value, here, scope)
        _read_entry(key, value, scope, here, node, depth, strict)


def _check_key(key, value, here: str, scope: str) -> None:
    """A key SNS would refuse: `$or` over policies that is not SNS's operator, an empty name or step."""
    if key == OR and isinstance(value, list) and any(
            isinstance(b, dict) and not (b.keys() & OPERATORS.keys()) for b in value):
        raise FilterPolicyError(f"{here}: must be a list of at least two policy objects to be SNS's {OR} "
                                f"operator (otherwise {OR} is a key like any other, and its list holds conditions)")
    if not isinstance(key, str) or not key or (scope == BODY and "" in key.split(".")):
        raise FilterPolicyError(f"{here or repr(key)}: a key must be a non-empty name (a dotted path's steps "
                                f"too)")


def _read_entry(key: str, value, scope: str, here: str, node: Node, depth: int, strict: bool) -> None:
    """One key of `node`'s policy: a nested policy, or a leaf with its conditions, at the end of the key's path."""
    path = steps(key, scope)
    target = node
    for step in path[:-1]:
        target = target.child(step)
    if isinstance(value, dict):
        if scope != BODY:
            raise FilterPolicyError(f"{here}: filter policy scope MessageAttributes does not support nested "
                                    f"filter policy (nested keys need filter_policy_scope MessageBody)")
        _read(value, scope, here, target.child(path[-1]), depth + len(path), strict)
    elif isinstance(value, list) and value:
        if strict:
            _check_conditions(value, here, target, path, depth)
        target.leaf(path[-1], value)
    elif strict:
        raise FilterPolicyError(f"{here}: must be a non-empty list of conditions"
                                + (" or a nested policy" if scope == BODY else ""))
    else:
        target.leaf(path[-1], [])  # nothing it could match


def _check_conditions(conditions: list, here: str, target: Node, path: list[str], depth: int) -> None:
    """A leaf SNS would refuse: too deep, its path given twice, a condition no operator takes."""
    if depth + len(path) - 1 > MAX_DEPTH:
        raise FilterPolicyError(f"{here}: nested more than {MAX_DEPTH} levels deep")
    if any(kind == "leaf" and other == path[-1] for kind, other, _ in target.entries):
        raise FilterPolicyError(f"{here}: the same path twice (as a dotted key and inside a nested one); "
                                f"give its conditions once")
    for n, condition in enumerate(conditions):
        problem = condition_problem(condition)
        if problem:
            joined = f"{here}[{n}]{problem}" if problem.startswith((".", "[")) else f"{here}[{n}]: {problem}"
            raise FilterPolicyError(joined)

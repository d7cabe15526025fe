"""The house rules, checked: dependencies point one way and nothing imports inside a function to dodge a cycle.

    delivery.rules      pure decisions: imports no Django and nothing above it
    delivery.transport  HTTP: may import rules
    delivery.engine     may import rules and transport
    delivery.web        may import everything below it
    subscriptions       the domain models: imports nothing from delivery

(docs/architecture.md, "Rules for contributors")."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("delivery", "subscriptions", "project")
LAYERS = ["delivery.rules", "delivery.transport", "delivery.engine", "delivery.web"]


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


MODULES = modules()


def imports(path: Path, *, top_level_only: bool) -> list[tuple[str, int]]:
    """(module imported, line) of a file; with top_level_only, only those not inside a function or class."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module,
                       node.lineno) for alias in node.names]
    return found


def project_imports(name: str) -> set[str]:
    return {target for target, _ in imports(MODULES[name], top_level_only=True)
            if target.split(".")[0] in PACKAGES and target in MODULES}


def layer(name: str) -> int | None:
    return next((index for index, prefix in enumerate(LAYERS) if name.startswith(prefix + ".")), None)


# pytest imports its plugins before Django is set up: the fixture imports the outbox when a test asks for it.
IMPORTS_INSIDE_ALLOWED = {"delivery.pytest_plugin"}


def test_no_import_inside_a_function_or_class():
    inner = []
    for name, path in MODULES.items():
        if name in IMPORTS_INSIDE_ALLOWED:
            continue
        top = {line for _, line in imports(path, top_level_only=True)}
        inner += [f"{path.relative_to(ROOT)}:{line} imports {target}"
                  for target, line in imports(path, top_level_only=False) if line not in top]
    assert inner == []


def test_no_import_cycles():
    graph = {name: project_imports(name) for name in MODULES}
    cycles, state = [], {}

    def visit(node, trail):
        state[node] = "open"
        for target in graph[node]:
            if state.get(target) == "open":
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = "done"

    for name in graph:
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_layers_import_only_downwards():
    upward = []
    for name in MODULES:
        mine = layer(name)
        for target in project_imports(name):
            theirs = layer(target)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{name} imports {target}")
            if name.startswith("subscriptions") and target.startswith("delivery"):
                upward.append(f"{name} imports {target}")
    assert upward == []


def test_rules_are_pure():
    impure = [f"{name} imports {target}" for name in MODULES if layer(name) == 0
              for target, _ in imports(MODULES[name], top_level_only=True)
              if target.split(".")[0] in ("django", "rest_framework", "django_rq", "redis", "requests", "rq")]
    assert impure == []

"""The house rules, checked: dependencies point one way and nothing imports inside a function to dodge a cycle.

    delivery.rules      pure decisions: imports no Django and nothing above it
    delivery.transport  HTTP: may import rules
    delivery.engine     may import rules and transport
    delivery.web        may import everything below it
    subscriptions       the domain models: imports nothing from delivery

delivery.engine is in wings, each a sub-package that is the one home of a concept; a wing imports only the wings
below it (WING_USES), and each edge (the web, the Python API, the management commands) only the wings meant for it
(EDGE_USES). `pytest tests/test_structure.py -s` prints the wings' graph.

(docs/architecture.md, "Rules for contributors")."""

import ast
import importlib
import re
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import RequestFactory
from rest_framework.mixins import DestroyModelMixin

from delivery.engine.plumbing import queues
from delivery.urls import router
from delivery.web.console.service_forms import ServiceAdmin, ServiceForm

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


def _imported(node: ast.AST) -> list[tuple[str, int]]:
    if isinstance(node, ast.Import):
        return [(alias.name, node.lineno) for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module,
                 node.lineno) for alias in node.names]
    return []


def _catches_import_error(node: ast.Try) -> bool:
    """An optional package's import: its failure caught (ImportError, or any Exception where a half-installed
    package may raise otherwise)."""
    names = {"ImportError", "ModuleNotFoundError", "Exception"}
    return any(isinstance(handler.type, ast.Name) and handler.type.id in names
               or isinstance(handler.type, ast.Tuple) and {getattr(e, "id", "") for e in handler.type.elts} & names
               for handler in node.handlers)


def _readies(tree: ast.Module) -> list[ast.FunctionDef]:
    """`ready()` of each AppConfig: Django's place for what needs the apps loaded (connecting signals, checks)."""
    return [item for node in tree.body if isinstance(node, ast.ClassDef)
            and any(getattr(base, "id", getattr(base, "attr", "")) == "AppConfig" for base in node.bases)
            for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "ready"]


def imports(path: Path, *, top_level_only: bool) -> list[tuple[str, int]]:
    """(module imported, line) of a file; with top_level_only, only those a module makes as it is imported or as
    its app is ready, in Django's idioms: at the top, in a top-level `try: … except ImportError:` (an optional
    package), or in an AppConfig's `ready()`."""
    tree = ast.parse(path.read_text())
    if not top_level_only:
        return [found for node in ast.walk(tree) for found in _imported(node)]
    found = []
    for node in tree.body:
        found += _imported(node)
        if isinstance(node, ast.Try) and _catches_import_error(node):
            found += [each for inner in node.body for each in _imported(inner)]
    for ready in _readies(tree):
        found += [each for node in ast.walk(ready) for each in _imported(node)]
    return found


def project_imports(name: str) -> set[str]:
    return {target for target, _ in imports(MODULES[name], top_level_only=True)
            if target.split(".")[0] in PACKAGES and target in MODULES}


def layer(name: str) -> int | None:
    return next((index for index, prefix in enumerate(LAYERS) if name.startswith(prefix + ".")), None)


# pytest imports its plugins before Django is set up: the fixture imports the outbox when a test asks for it.
IMPORTS_INSIDE_ALLOWED = {"delivery.pytest_plugin"}


def test_no_import_inside_a_function_or_class():
    """Imports are read in one place, so that a cycle cannot hide in a function. Django's idioms are the exceptions:
    an optional package in a top-level `try: … except ImportError:`, and an AppConfig's `ready()`."""
    inner = []
    for name, path in MODULES.items():
        if name in IMPORTS_INSIDE_ALLOWED:
            continue
        top = {line for _, line in imports(path, top_level_only=True)}
        inner += [f"{path.relative_to(ROOT)}:{line} imports {target}"
                  for target, line in imports(path, top_level_only=False) if line not in top]
    assert inner == []


def test_djangos_idioms_are_told_from_imports_inside_a_function(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text("import os\ntry:\n    import psycopg\nexcept ImportError:\n    psycopg = None\n"
                      "try:\n    import json\nexcept ValueError:\n    pass\n"
                      "class Config(AppConfig):\n    def ready(self):\n        from delivery import checks\n"
                      "    def other(self):\n        import csv\n"
                      "def helper():\n    import re\n")
    top = {line for _, line in imports(source, top_level_only=True)}
    assert sorted((line, name) for name, line in imports(source, top_level_only=False) if line not in top) == [
        (7, "json"), (14, "csv"), (16, "re")]


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


# The one door for a delivery's state (engine/state/lifecycle.py, with transitions.py its field changes): nothing
# else writes a delivery's status or spells the states no column names alone. `leases.py` writes under the lease
# (its claim and its guarded write-back), the one other writer the door allows.
DOOR = {"delivery/engine/state/lifecycle.py", "delivery/engine/state/transitions.py",
        "delivery/rules/vocabulary.py"}  # where the words themselves are defined
STATE_SPELLINGS = {
    "held spelled out": re.compile(r"next_attempt_at(__isnull| is None| is not None)"),
    "waiting spelled out": re.compile(r"Status\.WAITING|status=[\"']waiting[\"']"),
    "a status write": re.compile(r"\.update\([^)]*\b(status|next_attempt_at|lease_until)\s*=|\*\*transitions\.|"
                                 r"[\"'](status|next_attempt_at)[\"']\s*:\s*(Delivery\.Status|DeliveryStatus|Status)\."),
}
WRITES_UNDER_THE_LEASE = {"delivery/engine/claiming/leases.py"}


def test_a_deliverys_state_changes_only_through_the_door():
    found = []
    for name, path in MODULES.items():
        where = str(path.relative_to(ROOT))
        if where in DOOR or not name.startswith("delivery"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for what, pattern in STATE_SPELLINGS.items():
                if pattern.search(line) and not (what == "a status write" and where in WRITES_UNDER_THE_LEASE):
                    found.append(f"{where}:{number}: {what}: {line.strip()}")
    assert found == []


# What a project embedding Herald calls from Python sits beside the engine, not above the web layer.
PYTHON_API = ("delivery.events", "delivery.testing", "delivery.signals", "delivery.receiver", "delivery.conf")


def test_the_python_api_depends_only_downwards():
    assert [f"{name} imports {target}" for name in PYTHON_API for target in project_imports(name)
            if target.startswith("delivery.web")] == []


# The engine's wings, lowest first, and what each may import (docs/architecture.md, "The house").
WING_USES = {
    "plumbing": set(),
    "state": {"plumbing"},
    "claiming": {"state", "plumbing"},
    "accounts": {"state", "plumbing"},
    "intake": {"accounts", "state", "plumbing"},
    "sending": {"claiming", "accounts", "state", "plumbing"},
    "scheduler": {"sending", "intake", "claiming", "accounts", "state", "plumbing"},
}
EDGE_USES = {  # module prefix: the wings it may import
    "delivery.web": {"accounts", "intake", "state", "plumbing"},
    "delivery.events": {"accounts", "intake", "plumbing"},
    "delivery.apps": {"intake", "plumbing"},  # ready(): the operational events' receivers, tracing
    "delivery.tenants": {"accounts"},
    "delivery.testing": {"intake", "plumbing"},
    "delivery.management": {"scheduler", "sending", "plumbing"},
    "project": {"plumbing"},
}
MAX_WING_MODULES = 10


def wing_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["delivery", "engine"] else None


def wing_graph() -> dict[str, dict[str, int]]:
    """{wing: {wing it imports: how many imports}}."""
    graph = {wing: {} for wing in WING_USES}
    for name in MODULES:
        mine = wing_of(name)
        for target in project_imports(name):
            theirs = wing_of(target)
            if mine and theirs and theirs != mine:
                graph[mine][theirs] = graph[mine].get(theirs, 0) + 1
    return graph


def test_the_engine_is_in_wings_of_at_most_ten_modules():
    engine = ROOT / "delivery" / "engine"
    loose = [path.name for path in engine.glob("*.py") if path.name != "__init__.py"]
    assert loose == [], "every engine module lives in a wing (delivery/engine/<wing>/)"
    assert {name.split(".")[2] for name in MODULES if wing_of(name)} == set(WING_USES)
    for wing in WING_USES:
        modules = [name for name in MODULES if wing_of(name) == wing]
        assert 0 < len(modules) <= MAX_WING_MODULES, (wing, modules)
        assert (ROOT / "delivery" / "engine" / wing / "__init__.py").read_text().startswith('"""'), wing


def test_wings_import_one_way():
    graph = wing_graph()
    print("\nThe engine's wings (an arrow: imports, with how many imports):")
    for wing in WING_USES:
        modules = sorted(name.split(".")[-1] for name in MODULES if wing_of(name) == wing)
        print(f"  {wing:10s} [{', '.join(modules)}]")
        for target, count in sorted(graph[wing].items()):
            print(f"  {'':10s} -> {target} ({count})")
    wrong = [f"{wing} imports {target}" for wing, targets in graph.items() for target in targets
             if target not in WING_USES[wing]]
    assert wrong == []


def test_the_edges_import_only_the_wings_meant_for_them():
    """An edge imports the wings meant for it; a module outside the engine that is no edge imports none."""
    wrong = []
    for name in MODULES:
        if name.startswith("delivery.engine"):
            continue
        edge = next((prefix for prefix in EDGE_USES if name == prefix or name.startswith(prefix + ".")), None)
        allowed = EDGE_USES[edge] if edge else set()
        wrong += [f"{name} imports {target}" for target in project_imports(name)
                  if wing_of(target) and wing_of(target) not in allowed]
    assert wrong == []


# Names the import graph cannot see: RQ's jobs are queued by the path of their function, and the app connects its
# operational events by a module's name.
NAMED_BY_STRING = [queues.PUMP_JOB, queues.DELIVER_JOB, "delivery.engine.intake.fanout.fan_out",
                   "delivery.engine.intake.operational.connect"]


@pytest.mark.django_db
def test_the_models_and_their_migrations_agree():
    """A model change (an index, a field) ships with its migration: `migrate` on a deployment builds what the code
    reads along."""
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits 1 when a migration is missing


def test_what_is_named_by_a_string_exists():
    for dotted in NAMED_BY_STRING:
        module, name = dotted.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name, None)), dotted


def test_one_way_to_wait_for_a_commit():
    """`after_commit` (engine/plumbing/database.py) is the one way code waits for its transaction: robust, and
    the same everywhere, rather than six spellings of `transaction.on_commit`."""
    home = ROOT / "delivery" / "engine" / "plumbing" / "database.py"
    found = [f"{path.relative_to(ROOT)}:{number}" for name, path in MODULES.items() if path != home
             for number, line in enumerate(path.read_text().splitlines(), 1) if "on_commit(" in line]
    assert found == []


def test_the_portal_reads_through_selectors():
    """The portal's pages read what a tenant may see through delivery/web/selectors.py, each query scoped to the
    tenant there, not written again in a view."""
    package = ROOT / "delivery" / "web" / "portal"
    portal = sorted(package.rglob("*.py"))
    assert package / "pages.py" in portal  # the test reads the views
    assert [f"{path.relative_to(package)}: {line.strip()}" for path in portal for line in path.read_text().splitlines()
            if ".objects." in line] == []


# An AppConfig.ready() imports its models and Herald's once the apps are loaded: that is what it is for.
TEST_IMPORTS_INSIDE_ALLOWED = {"tests/hostproject/shop/apps.py"}


def test_tests_import_at_the_top():
    """Tests too import at the top, so what a test module needs is read in one place (and a cycle cannot hide)."""
    inner = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where in TEST_IMPORTS_INSIDE_ALLOWED:
            continue
        top = {line for _, line in imports(path, top_level_only=True)}
        inner += [f"{where}:{line} imports {target}" for target, line in imports(path, top_level_only=False)
                  if line not in top]
    assert inner == []


def test_every_console_page_that_writes_writes_through_a_service():
    """A console page that changes Herald's rows saves through the service the API calls (a ServiceForm:
    console/service_forms.py), so a rule is checked once, in the service, for every door; a new page that saved
    its form itself would skip them. Pages whose fields are all read-only (records, health) are not writers."""
    request = RequestFactory().get("/admin/")
    request.user = get_user_model()(is_superuser=True, is_staff=True, is_active=True)
    writers, bypassing = [], []
    for model, page in admin.site._registry.items():
        if model._meta.app_label not in {"herald_subscriptions", "herald_delivery"}:
            continue
        for obj in (None, model()):
            if obj is None and not page.has_add_permission(request):
                continue
            if obj is not None and not page.has_change_permission(request, obj):
                continue
            fields = flatten_fieldsets(page.get_fieldsets(request, obj))
            editable = set(fields) - set(page.get_readonly_fields(request, obj))
            if editable:
                writers.append(model.__name__)
                if not (issubclass(page.form, ServiceForm) and isinstance(page, ServiceAdmin)):
                    bypassing.append(f"{model.__name__} ({'add' if obj is None else 'change'}): {sorted(editable)}")
    assert bypassing == []
    assert {"Topic", "Subscription", "EventType", "Portal", "Tenant"} <= set(writers)  # the test sees the writers
    with_inlines = [model.__name__ for model, page in admin.site._registry.items()
                    if isinstance(page, ServiceAdmin) and page.get_inline_instances(request, model())]
    assert with_inlines == []  # a formset refused after the service's write would leave it committed


# The doors (the API, the console, the portal) delete rows only through a service (engine/accounts/removal.py,
# tenancy, event_types), which locks what goes and refuses while a delivery is being sent: a `.delete()` there
# would skip it. What a door writes itself is `.delete()` without arguments (a model instance's or a queryset's:
# theirs take none, or only keywords) or Django's and DRF's own deletes reached through `super()`; a delete naming
# what to delete (`connection.delete(key)`, a Redis pipeline's, a cache's) is not a row's.
DEFAULT_DELETES = {"delete_model", "delete_queryset", "perform_destroy"}


def row_deletes(source: str) -> list[str]:
    """What `source` deletes by itself, as `line: call`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver, name = node.func.value, node.func.attr
        by_super = (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name)
                    and receiver.func.id == "super")
        if (name == "delete" and not node.args) or (by_super and name in DEFAULT_DELETES):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_row_deletes_are_told_from_other_deletes():
    source = ("subscription.delete()\nTopic.objects.filter(owner=user).delete()\nsuper().delete_model(request, obj)\n"
              "tenant.delete(keep_parents=True)\nconnection.delete(key)\npipe.decr(key).delete(other).execute()\n"
              "removal.subscription_delete(subscription=subscription)\nsuper().delete_view(request, object_id)\n")
    assert [found.split(":")[0] for found in row_deletes(source)] == ["1", "2", "3", "4"]


def test_the_doors_delete_rows_only_through_a_service():
    """No `.delete()` of a row in delivery/web; every view set that answers DELETE and every console page that may
    delete has a delete of its own (DRF's `perform_destroy`, the admin's `delete_model` and `delete_queryset`,
    which the bulk "Delete selected" action calls): the defaults delete the row themselves."""
    written = [f"{path.relative_to(ROOT)}:{found}" for name, path in MODULES.items() if name.startswith("delivery.web")
               for found in row_deletes(path.read_text())]
    assert written == []
    views = {viewset.__name__: viewset for _, viewset, _ in router.registry
             if "delete" in viewset.http_method_names and issubclass(viewset, DestroyModelMixin)}
    assert {"TopicViewSet", "SubscriptionViewSet", "TenantViewSet", "EventTypeViewSet"} <= set(views)  # it sees them
    assert [name for name, viewset in views.items()
            if viewset.perform_destroy is DestroyModelMixin.perform_destroy] == []
    request = RequestFactory().get("/admin/")
    request.user = get_user_model()(is_superuser=True, is_staff=True, is_active=True)
    pages = {model.__name__: page for model, page in admin.site._registry.items()
             if model._meta.app_label in {"herald_subscriptions", "herald_delivery"}
             and page.has_delete_permission(request, model())}
    assert {"Topic", "Subscription", "Tenant", "EventType"} <= set(pages)  # the test sees the pages that delete
    assert [name for name, page in pages.items() if type(page).delete_model is admin.ModelAdmin.delete_model
            or type(page).delete_queryset is admin.ModelAdmin.delete_queryset] == []


# The doors, by resource: each module of the API, the console and the portal has its tests at the mirrored path
# (`delivery/web/api/topics.py` → `tests/delivery/web/api/test_topics.py`, a package's module likewise).
DOORS = ("api", "console", "portal")


def test_each_door_module_has_its_tests_at_the_mirrored_path():
    missing, doors = [], {door: sorted((ROOT / "delivery" / "web" / door).rglob("*.py")) for door in DOORS}
    assert all(len(paths) > 2 for paths in doors.values())  # the test sees the doors' modules
    for paths in doors.values():
        for path in paths:
            if path.name == "__init__.py":
                continue
            mirrored = ROOT / "tests" / path.parent.relative_to(ROOT) / f"test_{path.name}"
            if not mirrored.exists():
                missing.append(f"{path.relative_to(ROOT)} has no {mirrored.relative_to(ROOT)}")
    assert missing == []


# Rooms of one concept (docs/architecture.md, "Rules for contributors"): a module past these sizes holds two.
MAX_MODULE_LINES = 320
MAX_FUNCTION_LINES = 55


def test_no_module_and_no_function_outgrows_its_room():
    found = []
    for path in MODULES.values():
        source = path.read_text()
        if source.count("\n") > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(ROOT)}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert found == []


# A delivery row is built in one place (lifecycle.new_delivery): its endpoint, owner and tenant are copied onto it
# for the claim's indexes, and a second builder would be a second place to forget one.
DELIVERY_BUILDER = "delivery/engine/state/lifecycle.py"


def test_one_builder_of_a_delivery_row():
    built = [f"{path.relative_to(ROOT)}:{found}" for path in MODULES.values()
             if str(path.relative_to(ROOT)) != DELIVERY_BUILDER for found in delivery_builds(path.read_text())]
    assert built == []


def delivery_builds(source: str) -> list[str]:
    """Where `source` builds a delivery row itself: `Delivery(…)`, `models.Delivery(…)`, `Delivery.objects.create(…)`
    (or get_or_create, update_or_create), as `line: call`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        call = ast.unparse(node.func)
        if call in ("Delivery", "models.Delivery") or re.fullmatch(
                r"(models\.)?Delivery\.objects\.(create|get_or_create|update_or_create)", call):
            found.append(f"{node.lineno}: {call}")
    return found


def test_delivery_builds_are_told_from_other_calls():
    source = ("Delivery(message=m)\nmodels.Delivery()\nDelivery.objects.create(x=1)\nDelivery.objects.filter(x=1)\n"
              "lifecycle.new_delivery(m)\nDelivery.objects.bulk_create(rows)\nDeliveryStatus('pending')\n")
    assert delivery_builds(source) == ["1: Delivery", "2: models.Delivery", "3: Delivery.objects.create"]


# What a module keeps between calls, in the process: each is named here with what it is. A cache (what can be
# made again from the database or the code, so that forgetting it costs time only), or the process's one of
# something (its transport, its journal writer, its tally). A new one is added here with its reason, or is an
# argument instead. Django's own module-level names (URL patterns, a template library, signals) are not state.
PROCESS_STATE = {
    "delivery.conf:herald": "the settings, read through Django's",
    "delivery.engine.accounts.catalog:_compiled": "cache: compiled JSON Schemas, bounded",
    "delivery.engine.claiming.throttle:_script": "cache: the registered Lua script",
    "delivery.engine.intake.fanout:_decoded": "cache: decoded payloads of the message being fanned out",
    "delivery.engine.intake.publishing:capturing": "context: events captured by a test (delivery.testing)",
    "delivery.engine.plumbing.availability:_down_since": "the process's view of its dependencies (logged once)",
    "delivery.engine.plumbing.availability:_lock": "guards _down_since",
    "delivery.engine.plumbing.clock:_lock": "guards the database clock's measured offset",
    "delivery.engine.plumbing.clock:_next_measure": "cache: when the database clock is measured again",
    "delivery.engine.plumbing.clock:_offset": "cache: the database clock's offset",
    "delivery.engine.plumbing.counters:_pending": "the process's tally, added to Redis once a second",
    "delivery.engine.plumbing.counters:_lock": "guards the tally",
    "delivery.engine.plumbing.counters:_flushing": "one flush at a time",
    "delivery.engine.plumbing.counters:_state": "whether the process buffers, its flusher thread",
    "delivery.engine.plumbing.counters:_wake": "ends the flusher's wait",
    "delivery.engine.plumbing.redis_link:_clients": "cache: the process's Redis clients",
    "delivery.engine.plumbing.redis_link:_lock": "guards _clients",
    "delivery.engine.plumbing.shortcuts:_templates": "cache: DRF fields built once per thread",
    "delivery.engine.plumbing.tracing:_state": "the process's tracer, once configured",
    "delivery.engine.plumbing.tracing:_complained": "when each tracing failure was last logged (once a minute)",
    "delivery.engine.sending.handover:handed_over": "the process's sends handed over between its pumps",
    "delivery.engine.sending.journal:_pending": "the journal writer's queue",
    "delivery.engine.sending.journal:_failing": "whether the last journal write failed (send cautiously)",
    "delivery.engine.sending.journal:_writer": "the process's journal writer thread",
    "delivery.engine.sending.journal:_writer_lock": "guards _writer",
    "delivery.engine.sending.oauth:_local": "cache: tokens per event loop",
    "delivery.engine.sending.pump:stopping": "the worker asked to stop (a signal handler sets it)",
    "delivery.engine.sending.recording:_rng": "the retry jitter's randomness",
    "delivery.engine.state.announce:_tenant_ids": "cache: tenants' external ids for operational events",
    "delivery.redaction:_classes": "the logging classes whose records are redacted",
    "delivery.rules.filters.matching:_shapes": "cache: compiled filter policies, bounded",
    "delivery.rules.schema_budget:_meter": "context: the schema budget of the request being checked",
    "delivery.rules.schema_budget:_keys_of": "cache: a schema's keys, bounded",
    "delivery.rules.schema_budget:_regexes": "cache: compiled patterns, bounded",
    "delivery.rules.schema_budget:_short": "a reprlib.Repr for error words",
    "delivery.transport.sender:_transport": "the process's transport",
    "delivery.transport.sender:_transport_lock": "guards _transport",
    "delivery.transport.sandbox:_callbacks": "the one loop mini-racer reports every isolate's results on",
    "delivery.transport.sandbox:_callbacks_lock": "guards _callbacks",
    "delivery.transport.transforms:_web": "the sandbox process a web process's checks, test-runs and previews use",
    "delivery.transport.transforms:_web_lock": "guards _web: one call at a time",
    "delivery.web.probes:_migrated": "cache: the migrations once applied",
}
DJANGO_NAMES = {"urlpatterns", "router", "docs", "app_name", "register", "__all__", "application"}
MUTABLE_CALLS = {"dict", "list", "set", "Counter", "defaultdict", "deque", "OrderedDict", "local", "Queue", "count",
                 "Lock", "RLock", "Event", "ContextVar", "SystemRandom", "Repr"}


def module_state(name: str, source: str) -> set[str]:
    """`module:name` of what a module keeps between calls: a lower-case module-level name bound to a container, a
    lock, an object or a value a function rebinds (`global`)."""
    tree, found = ast.parse(source), set()
    rebound = {target for node in ast.walk(tree) if isinstance(node, ast.Global) for target in node.names}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        for target in targets:
            if not isinstance(target, ast.Name) or target.id.isupper() or target.id in DJANGO_NAMES:
                continue
            value = node.value
            called = value.func.attr if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) else (
                value.func.id if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) else "")
            if (isinstance(value, ast.Dict | ast.List | ast.Set) or called in MUTABLE_CALLS
                    or called[:1].isupper() or target.id in rebound):
                found.add(f"{name}:{target.id}")
    return found


def test_what_a_module_keeps_between_calls_is_named_with_what_it_is():
    kept = {state for name, path in MODULES.items() if not name.endswith(".signals") and "templatetags" not in name
            for state in module_state(name, path.read_text())}
    assert sorted(kept - set(PROCESS_STATE)) == []  # new: name it above with what it is, or pass it in
    assert sorted(set(PROCESS_STATE) - kept) == []  # gone: take it off the list


def test_module_state_is_told_from_constants():
    source = ("_cache = {}\nLIMITS = {'a': 1}\n_lock = threading.Lock()\nlog = logging.getLogger(__name__)\n"
              "_n = 0\n\ndef bump():\n    global _n\n    _n += 1\nurlpatterns = []\nregistry: dict = {}\n")
    assert module_state("m", source) == {"m:_cache", "m:_lock", "m:_n", "m:registry"}

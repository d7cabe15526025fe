"""The JSON Schemas of an owner's catalog, made safe to evaluate on a shared process (docs/tenants.md, "What a
schema may cost").

An owner's schema runs inside every publish of a type it validates, in the web process every tenant shares, so its
cost must be known when it is stored, not found out by a publish:

- **Nothing is fetched.** References resolve inside the schema only (its `$defs`, JSON pointers, `$anchor`s and
  `$id`'d parts); the registry's retrieval refuses every other address, so no library default can open a
  connection. A reference that does not resolve inside the schema is refused when the schema is stored.
- **Regular expressions run in linear time.** `pattern` and `patternProperties` are compiled with RE2 when the
  schema is stored and evaluated with it; what RE2 cannot run in linear time (backreferences, lookaround) is
  refused. (`^(a+)+$` on 30 characters took Python's engine minutes.)
- **Equality is hashed.** `enum` and `uniqueItems` compare canonical keys (one hash per value) instead of every
  pair: 9,000 enum values against 20,000 items, or 20,000 unique objects, are linear.
- **Evaluation ends.** A cycle of references that does not descend into the payload (`{"$ref": "#"}`,
  `allOf` back to itself) is refused, so is a schema nested deeper than MAX_DEPTH or whose evaluation of one value
  fans out to more than MAX_FAN_OUT subschemas, and `$dynamicRef`.
- **A dialect of its own.** `$schema` only at the top, naming 2020-12: jsonschema evaluates a part that names a
  dialect with that dialect's own validator, outside every bound.
- **A budget per payload**, spent as it is evaluated: `schema_budget.py`.

Pure: no Django; `problem(schema)` when a schema is stored, then `schema_budget.compile_schema(schema)` once and
`schema_budget.first_error(...)` per payload.
"""

import json
from dataclasses import dataclass, field
from urllib.parse import urldefrag

import re2
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

MAX_SCHEMA_BYTES = 64 * 1024
MAX_DEPTH = 32  # subschemas inside subschemas
MAX_FAN_OUT = 2_000  # subschemas one value of a payload can be checked against, references followed

# Keywords whose value is a subschema, by how it applies: to the same value (in place) or to a part of it.
IN_PLACE_ONE = ("not", "if", "then", "else")
IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
IN_PLACE_MAP = ("dependentSchemas",)
DESCEND_ONE = ("additionalProperties", "items", "contains", "propertyNames", "unevaluatedItems",
               "unevaluatedProperties")
DESCEND_MANY = ("prefixItems",)
DESCEND_MAP = ("properties", "patternProperties")
DEFINITIONS = ("$defs", "definitions")
DIALECTS = ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#")


class TooCostly(Exception):
    """The payload needed more evaluation than its budget allows."""


class SchemaRefused(ValueError):
    """Why a schema cannot be stored: `where` is a JSON pointer into it ("" for the whole)."""

    def __init__(self, reason: str, where: str = ""):
        super().__init__(reason)
        self.reason, self.where = reason, where


def _refuse_retrieval(uri: str):
    raise Unresolvable(ref=uri)  # nothing is ever fetched: the reference does not resolve


REGISTRY = Registry(retrieve=_refuse_retrieval)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def regex(pattern: str):
    """`pattern` compiled by RE2 (linear time), or SchemaRefused."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except Exception as exc:  # re2.error: what RE2 cannot run in linear time, or not a regular expression
        reason = str(exc.args[0] if exc.args else exc).strip("b'\"")
        raise SchemaRefused(f"the regular expression {pattern[:100]!r} is not supported ({reason[:100]}): "
                            f"catalog schemas use RE2, without backreferences or lookaround") from None


@dataclass
class _Node:
    schema: dict
    where: str
    in_place: list = field(default_factory=list)  # ids of subschemas applied to the same value
    leaves: int = 0  # boolean subschemas it applies
    descend: list = field(default_factory=list)  # ids of subschemas applied to a part of it


def problem(schema) -> SchemaRefused | None:
    """Why `schema` cannot be stored (a valid 2020-12 schema whose cost is bounded), or None."""
    if schema is None:
        return None
    if not isinstance(schema, (dict, bool)):
        return SchemaRefused("must be a JSON Schema: an object (or true/false)")
    try:
        if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
            return SchemaRefused(f"must be at most {MAX_SCHEMA_BYTES} bytes as JSON")
        _check_depth(schema, 0, "")
        Draft202012Validator.check_schema(schema)
        if isinstance(schema, dict):
            _check_graph(schema)
    except SchemaRefused as refused:
        return refused
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        return SchemaRefused(f"is not a valid JSON Schema (2020-12): {exc.message[:300]}", f"/{where}" if where else "")
    except RecursionError:
        return SchemaRefused(f"is nested too deeply (at most {MAX_DEPTH} levels of subschemas)")
    except Exception as exc:  # noqa: BLE001 (the meta-schema's own checks: `a{4294967296}` overflows Python's re)
        return SchemaRefused(f"is not a valid JSON Schema (2020-12): {str(exc)[:200]}")
    return None


def _check_depth(value, depth: int, where: str) -> None:
    if depth > MAX_DEPTH * 4:  # JSON levels: a subschema level is a keyword and a value, often a list between
        raise SchemaRefused(f"is nested too deeply (at most {MAX_DEPTH} levels of subschemas)", where)
    if isinstance(value, dict):
        for key, item in value.items():
            _check_depth(item, depth + 1, f"{where}/{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _check_depth(item, depth + 1, f"{where}/{n}")


def _subschemas(schema: dict, where: str):
    """(subschema, where, in_place) for each subschema `schema` applies, and its definitions (in_place None)."""
    for key in IN_PLACE_ONE + DESCEND_ONE:
        if isinstance(schema.get(key), (dict, bool)):
            yield schema[key], f"{where}/{key}", key in IN_PLACE_ONE
    for key in IN_PLACE_MANY + DESCEND_MANY:
        if isinstance(schema.get(key), list):
            for n, sub in enumerate(schema[key]):
                yield sub, f"{where}/{key}/{n}", key in IN_PLACE_MANY
    for key in IN_PLACE_MAP + DESCEND_MAP + DEFINITIONS:
        if isinstance(schema.get(key), dict):
            for name, sub in schema[key].items():
                yield sub, f"{where}/{key}/{name}", (key in IN_PLACE_MAP) if key not in DEFINITIONS else None


def _check_graph(root: dict) -> None:
    """Every reference resolves inside the schema, every regular expression compiles with RE2, no cycle of
    references evaluates the same value forever, and one value's evaluation fans out to at most MAX_FAN_OUT
    subschemas."""
    graph = _Graph(root)
    graph.visit(root, "", REGISTRY.with_resource("", DRAFT202012.create_resource(root)).crawl().resolver(base_uri=""))
    graph.check_references()
    if graph.uses_patterns and graph.uses_unevaluated:
        raise SchemaRefused("unevaluatedProperties cannot be combined with patternProperties in a catalog schema")
    _check_fan_out(graph.nodes, id(root))


class _Graph:
    """A schema's subschemas as a graph (`nodes`, by id), built by visiting each once, references followed."""

    def __init__(self, root: dict):
        self.nodes: dict[int, _Node] = {}
        self.uses_patterns = self.uses_unevaluated = False
        self.structural = {id(root)}  # subschemas in schema positions; a reference must point at one of them
        self.targets: list[tuple[object, str, str]] = []  # (what a $ref points at, where the $ref is, the $ref)

    def visit(self, schema, where: str, resolver) -> None:
        if not isinstance(schema, dict) or id(schema) in self.nodes:
            return
        node = self.nodes[id(schema)] = _Node(schema, where)
        if isinstance(schema.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(schema))
        self._check_keywords(schema, where)
        pending = self._reference(schema, where, resolver, node)
        for sub, sub_where, in_place in _subschemas(schema, where):
            self.structural.add(id(sub))
            if isinstance(sub, bool) and in_place is not None:
                node.leaves += 1  # `true`/`false` subschemas cost a check each too
            if isinstance(sub, dict):
                if in_place is True:
                    node.in_place.append(id(sub))
                elif in_place is False:
                    node.descend.append(id(sub))
                pending.append((sub, sub_where, resolver))
        for sub, sub_where, sub_resolver in pending:
            self.visit(sub, sub_where, sub_resolver)

    def _check_keywords(self, schema: dict, where: str) -> None:
        """What a subschema may not hold ($dynamicRef, a dialect of its own) and its regular expressions."""
        if "$dynamicRef" in schema:
            raise SchemaRefused("$dynamicRef is not supported in catalog schemas; use $ref", where)
        if "$schema" in schema and (where or schema["$schema"] not in DIALECTS):
            # jsonschema evaluates a part that names a dialect with that dialect's own validator: none of the
            # bounds here would apply to it
            raise SchemaRefused("$schema is allowed only at the top, naming JSON Schema 2020-12", where)
        if isinstance(schema.get("pattern"), str):
            regex(schema["pattern"])
        for pattern in schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else ():
            regex(pattern)
            self.uses_patterns = True
        self.uses_unevaluated = self.uses_unevaluated or "unevaluatedProperties" in schema

    def _reference(self, schema: dict, where: str, resolver, node: _Node) -> list:
        """The subschema `schema`'s `$ref` points at, to visit (applied in place), resolved inside the schema."""
        if not isinstance(schema.get("$ref"), str):
            return []
        try:
            resolved = resolver.lookup(schema["$ref"])
        except Unresolvable:
            raise SchemaRefused(f"the reference {schema['$ref'][:200]!r} does not resolve inside the schema "
                                f"(references are never fetched)", where) from None
        except Exception:  # not a URI reference at all
            raise SchemaRefused(f"the reference {schema['$ref'][:200]!r} is not a valid reference", where) from None
        target = resolved.contents  # (the registry holds this schema alone: nothing else resolves)
        self.targets.append((target, where, schema["$ref"]))
        if not isinstance(target, dict):
            return []
        node.in_place.append(id(target))
        return [(target, f"{urldefrag(schema['$ref'])[1] or '#'}", resolved.resolver)]

    def check_references(self) -> None:
        """Every reference points at a subschema, not at a part of one or at a value that is no schema."""
        for target, where, ref in self.targets:
            if not isinstance(target, bool) and id(target) not in self.structural:
                raise SchemaRefused(f"the reference {ref[:200]!r} does not point at a subschema (only at a part of "
                                    f"one, or at a value that is not a schema)", where)


def _check_fan_out(nodes: dict[int, _Node], root: int) -> None:
    """Refuses a cycle of in-place applications (it never ends) and a value checked against more than
    MAX_FAN_OUT subschemas (counting each way to reach one; a descent already on the way counts once)."""
    state: dict[int, str] = {}
    cost: dict[int, int] = {}

    def walk(key: int, chain: frozenset) -> int:
        """`chain`: the subschemas applied in place to the same value on the way here, `key` among them."""
        if key in cost:
            return cost[key]
        node = nodes[key]
        state[key] = "open"
        total = 1 + node.leaves
        for sub in node.in_place:
            if state.get(sub) == "open":
                if sub in chain:
                    raise SchemaRefused("a reference cycle never descends into the payload, so its evaluation "
                                        "would never end", nodes[sub].where)
                total += 1  # a recursion through a descent: the payload's depth ends it
            else:
                total += walk(sub, chain | {sub})
        for sub in node.descend:
            total += 1 if state.get(sub) == "open" else walk(sub, frozenset({sub}))
            if total > MAX_FAN_OUT:
                break
        state[key] = "done"
        if total > MAX_FAN_OUT:
            raise SchemaRefused(f"its evaluation fans out to more than {MAX_FAN_OUT} subschemas for one value "
                                f"(references followed); simplify it", node.where)
        cost[key] = total
        return total

    walk(root, frozenset({root}))

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
- **A budget per payload.** Evaluation spends one unit per keyword checked, plus the size of what a keyword loops
  over, plus the size of what an error describes; past `budget` units it stops with `TooCostly`, which the publish
  answers as a 400. What the payload size allows is bounded whatever the schema.

Pure: no Django; `problem(schema)` at store time, `compile_schema(schema)` once, then `first_error(...)`.
"""

import contextvars
import json
import reprlib
from dataclasses import dataclass, field
from urllib.parse import urldefrag

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

MAX_SCHEMA_BYTES = 64 * 1024
MAX_DEPTH = 32  # subschemas inside subschemas
MAX_FAN_OUT = 2_000  # subschemas one value of a payload can be checked against, references followed
DEFAULT_BUDGET = 20_000  # units of evaluation per payload (docs/benchmarks.md, "Schema worst cases")
ERROR_UNITS = 10  # an error costs about ten keyword checks to make
REGEX_CHARS_PER_UNIT = 16  # a regex search spends one unit per this many characters it reads
DESCENT_UNITS = 2  # a descent into a subschema (a new validator for it) costs about two keyword checks

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


# -- at store time -----------------------------------------------------------------------------------------------


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
    nodes: dict[int, _Node] = {}
    resolver = REGISTRY.with_resource("", DRAFT202012.create_resource(root)).crawl().resolver(base_uri="")
    uses_patterns = uses_unevaluated = False
    structural = {id(root)}  # subschemas in schema positions; a reference must point at one of them
    targets: list[tuple[object, str, str]] = []  # (what a $ref points at, where the $ref is, the $ref)

    def visit(schema, where: str, resolver) -> None:
        nonlocal uses_patterns, uses_unevaluated
        if not isinstance(schema, dict) or id(schema) in nodes:
            return
        node = nodes[id(schema)] = _Node(schema, where)
        if isinstance(schema.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(schema))
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
            uses_patterns = True
        uses_unevaluated = uses_unevaluated or "unevaluatedProperties" in schema
        pending = []
        if isinstance(schema.get("$ref"), str):
            try:
                resolved = resolver.lookup(schema["$ref"])
            except Unresolvable:
                raise SchemaRefused(f"the reference {schema['$ref'][:200]!r} does not resolve inside the schema "
                                    f"(references are never fetched)", where) from None
            except Exception:  # not a URI reference at all
                raise SchemaRefused(f"the reference {schema['$ref'][:200]!r} is not a valid reference", where) from None
            target = resolved.contents  # (the registry holds this schema alone: nothing else resolves)
            targets.append((target, where, schema["$ref"]))
            if isinstance(target, dict):
                node.in_place.append(id(target))
                pending.append((target, f"{urldefrag(schema['$ref'])[1] or '#'}", resolved.resolver))
        for sub, sub_where, in_place in _subschemas(schema, where):
            structural.add(id(sub))
            if isinstance(sub, bool) and in_place is not None:
                node.leaves += 1  # `true`/`false` subschemas cost a check each too
            if isinstance(sub, dict):
                if in_place is True:
                    node.in_place.append(id(sub))
                elif in_place is False:
                    node.descend.append(id(sub))
                pending.append((sub, sub_where, resolver))
        for sub, sub_where, sub_resolver in pending:
            visit(sub, sub_where, sub_resolver)

    visit(root, "", resolver)
    for target, where, ref in targets:
        if not isinstance(target, bool) and id(target) not in structural:
            raise SchemaRefused(f"the reference {ref[:200]!r} does not point at a subschema (only at a part of "
                                f"one, or at a value that is not a schema)", where)
    if uses_patterns and uses_unevaluated:
        raise SchemaRefused("unevaluatedProperties cannot be combined with patternProperties in a catalog schema")
    _check_fan_out(nodes, id(root))


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


# -- when a payload is checked -----------------------------------------------------------------------------------


class _Meter:
    def __init__(self, budget: int):
        self.left = budget
        self.budget = budget
        self.keys: dict[int, object] = {}
        self.sizes: dict[int, int] = {}

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise TooCostly(self.budget)

    def size(self, value) -> int:
        """How many JSON values `value` holds (itself included), each counted once per payload."""
        if not isinstance(value, (dict, list)):
            return 1 if not isinstance(value, str) else 1 + len(value) // 64
        found = self.sizes.get(id(value))
        if found is None:
            items = value.values() if isinstance(value, dict) else value
            found = self.sizes[id(value)] = 1 + len(value) + sum(self.size(item) for item in items)
        return found

    def key(self, value):
        """A hashable key equal for JSON-equal values (1 and 1.0 alike, true and 1 not), once per container."""
        if isinstance(value, bool):
            return (1, value)
        if isinstance(value, (int, float)):
            return (2, value)
        if isinstance(value, str):
            return (3, value)
        if value is None:
            return (0,)
        found = self.keys.get(id(value))
        if found is None:
            if isinstance(value, list):
                found = (4, tuple(self.key(item) for item in value))
            else:
                found = (5, frozenset((name, self.key(item)) for name, item in value.items()))
            self.keys[id(value)] = found
        return found


_meter: contextvars.ContextVar[_Meter | None] = contextvars.ContextVar("herald_schema_meter", default=None)
_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist, _short.maxdict, _short.maxlevel = 60, 60, 4, 4, 2


BRANCHING = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "dependentSchemas"})  # a descent per branch
QUADRATIC = frozenset({"unevaluatedItems", "unevaluatedProperties"})  # jsonschema's `x not in <list>` per member


def _metered(name, check):
    def metered(validator, value, instance, schema):
        meter = _meter.get()
        if meter is None:
            yield from check(validator, value, instance, schema) or ()
            return
        size = len(instance) if isinstance(instance, (dict, list)) else 0
        meter.spend(1 + size + (DESCENT_UNITS * len(value) if name in BRANCHING and hasattr(value, "__len__")
                                else 0) + (size * size // 100 if name in QUADRATIC else 0))
        for error in check(validator, value, instance, schema) or ():
            if not isinstance(error.validator, str):  # made by this keyword (a descent's come named): an error
                meter.spend(ERROR_UNITS + meter.size(instance))  # object, and the value it describes written
            yield error
    return metered


def _enum(validator, enums, instance, schema):
    meter = _meter.get() or _Meter(10**18)
    keys = _enum_keys.get(id(enums))
    if keys is None or keys[0] is not enums:
        if len(_enum_keys) >= 10_000:
            _enum_keys.clear()
        keys = _enum_keys[id(enums)] = (enums, {_Meter(0).key(each) for each in enums})
    meter.spend(meter.size(instance))  # hashing its key reads the whole value
    if meter.key(instance) not in keys[1]:
        yield ValidationError(f"{_short.repr(instance)} is not one of the {len(enums)} values of its enum")


_enum_keys: dict[int, tuple] = {}


def _const(validator, const, instance, schema):
    meter = _meter.get() or _Meter(10**18)
    keys = _enum_keys.get(id(const))
    if keys is None or keys[0] is not const:
        if len(_enum_keys) >= 10_000:
            _enum_keys.clear()
        keys = _enum_keys[id(const)] = (const, _Meter(0).key(const))
    meter.spend(meter.size(instance))  # comparing (or hashing) keys reads the whole value
    if meter.key(instance) != keys[1]:
        yield ValidationError(f"{_short.repr(const)} was expected")


def _multiple_of(validator, divisor, instance, schema):
    try:
        yield from _MULTIPLE_OF(validator, divisor, instance, schema) or ()
    except (OverflowError, ArithmeticError):  # an integer too large for a float divisor
        yield ValidationError(f"{_short.repr(instance)} is too large to check as a multiple of {divisor}")


def _unique_items(validator, unique, instance, schema):
    if unique and validator.is_type(instance, "array"):
        meter = _meter.get() or _Meter(10**18)
        meter.spend(meter.size(instance))
        seen = set()
        for n, item in enumerate(instance):
            key = meter.key(item)
            if key in seen:
                yield ValidationError(f"has non-unique elements (item {n} repeats an earlier one)")
                return
            seen.add(key)


def _spend(units: int) -> None:
    meter = _meter.get()
    if meter is not None:
        meter.spend(units)


def _names_read(instance, patterns) -> int:
    """Units for matching every name of `instance` against every one of `patterns`: names × patterns searches,
    each reading its name."""
    return len(patterns) * sum(1 + len(name) // REGEX_CHARS_PER_UNIT for name in instance)


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string"):
        _spend(len(instance) // REGEX_CHARS_PER_UNIT)  # RE2 is linear, not free: ~10 MB/s on its slow path
        if not _regex(pattern).search(instance):
            yield ValidationError(f"{_short.repr(instance)} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if validator.is_type(instance, "object"):
        _spend(_names_read(instance, pattern_properties))
        for pattern, subschema in pattern_properties.items():
            compiled = _regex(pattern)
            for name, value in instance.items():
                if compiled.search(name):
                    yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = [_regex(pattern) for pattern in schema.get("patternProperties", {})]
    _spend(_names_read(instance, patterns))
    extras = [name for name in instance if name not in known and not any(p.search(name) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(f"Additional properties are not allowed ({', '.join(repr(e) for e in extras[:5])}"
                              f"{' …' if len(extras) > 5 else ''} unexpected)")


_regexes: dict[str, object] = {}


def _regex(pattern: str):
    found = _regexes.get(pattern)
    if found is None:
        if len(_regexes) >= 10_000:
            _regexes.clear()
        found = _regexes[pattern] = regex(pattern)
    return found


_MULTIPLE_OF = Draft202012Validator.VALIDATORS["multipleOf"]
_OWN = {"enum": _enum, "const": _const, "uniqueItems": _unique_items, "pattern": _pattern,
        "patternProperties": _pattern_properties, "additionalProperties": _additional_properties,
        "multipleOf": _multiple_of}
BoundedValidator = validators.extend(
    Draft202012Validator,
    validators={name: _metered(name, _OWN.get(name, check))
                for name, check in Draft202012Validator.VALIDATORS.items()},
)


def compile_schema(schema) -> BoundedValidator:
    """A validator for a schema `problem` accepted: references inside it only, RE2 for its regexes. Its resolver
    sits on a registry crawled once here: an `$anchor` or `$id` reference is then a lookup, not a crawl of the
    whole schema on every use (16 s for 2,000 items through an anchor in a 62 KB schema)."""
    if isinstance(schema, dict) and "$schema" in schema:  # (2020-12, checked): a reference back to the root
        schema = {key: value for key, value in schema.items() if key != "$schema"}  # stays with this validator
    resource = DRAFT202012.create_resource(schema)
    uri = resource.id() or ""
    resolver = REGISTRY.with_resource(uri, resource).crawl().resolver(base_uri=uri)
    return BoundedValidator(schema, _resolver=resolver)


def first_error(compiled, payload, *, budget: int = DEFAULT_BUDGET) -> ValidationError | None:
    """The first place (in path order) where `payload` breaks the schema, or None; TooCostly past `budget`."""
    token = _meter.set(_Meter(budget))
    try:
        errors = sorted(compiled.iter_errors(payload), key=lambda e: list(e.absolute_path))
    except RecursionError:
        raise TooCostly(budget) from None
    finally:
        _meter.reset(token)
    return errors[0] if errors else None

"""A payload checked against a catalog schema within a budget (docs/tenants.md, "What a schema may cost"); what
a schema may be is decided when it is stored, by `json_schema.problem`.

Evaluation spends one unit per keyword checked, plus the size of what a keyword loops over, a descent per branch
of an applicator, the characters a regex reads, the values a comparison reads and the size of what an error
describes; past `budget` units it stops with `TooCostly`, which the publish answers as a 400. jsonschema's own
keywords are kept, except those whose cost it hides: `enum`, `const` and `uniqueItems` compare hashed keys,
`pattern`, `patternProperties` and `additionalProperties` run RE2, `multipleOf` survives integers too large for a
float. Pure: no Django.

    compiled = compile_schema(schema)          # once per schema (catalog.validator caches it)
    error = first_error(compiled, payload)     # None, a ValidationError, or TooCostly

A request's payloads share one `Allowance` (a batch's entries): each is checked within what the ones before it left,
so a batch of 100 costs at most what one publish may.
"""

import contextvars
import reprlib

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from referencing.jsonschema import DRAFT202012

from delivery.rules.json_schema import REGISTRY, TooCostly, regex

DEFAULT_BUDGET = 20_000  # units of evaluation per payload (docs/benchmarks.md, "Schema worst cases")
ERROR_UNITS = 10  # an error costs about ten keyword checks to make
REGEX_CHARS_PER_UNIT = 16  # a regex search spends one unit per this many characters it reads
DESCENT_UNITS = 2  # a descent into a subschema (a new validator for it) costs about two keyword checks



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


_keys_of: dict[int, tuple] = {}  # a schema value (an enum's list, a const) -> (it, its comparison key), per process


def _schema_key(value, make):
    """`make(value)`, computed once per schema value (kept by the value's identity, checked on each use)."""
    found = _keys_of.get(id(value))
    if found is None or found[0] is not value:
        if len(_keys_of) >= 10_000:
            _keys_of.clear()
        found = _keys_of[id(value)] = (value, make(value))
    return found[1]


def _unbounded() -> _Meter:
    return _meter.get() or _Meter(10**18)  # (outside first_error: nothing to count against)


def _enum(validator, enums, instance, schema):
    meter = _unbounded()
    keys = _schema_key(enums, lambda values: {_Meter(0).key(each) for each in values})
    meter.spend(meter.size(instance))  # hashing its key reads the whole value
    if meter.key(instance) not in keys:
        yield ValidationError(f"{_short.repr(instance)} is not one of the {len(enums)} values of its enum")


def _const(validator, const, instance, schema):
    meter = _unbounded()
    key = _schema_key(const, _Meter(0).key)
    meter.spend(meter.size(instance))  # comparing (or hashing) keys reads the whole value
    if meter.key(instance) != key:
        yield ValidationError(f"{_short.repr(const)} was expected")


def _multiple_of(validator, divisor, instance, schema):
    try:
        yield from _MULTIPLE_OF(validator, divisor, instance, schema) or ()
    except (OverflowError, ArithmeticError):  # an integer too large for a float divisor
        yield ValidationError(f"{_short.repr(instance)} is too large to check as a multiple of {divisor}")


def _unique_items(validator, unique, instance, schema):
    if unique and validator.is_type(instance, "array"):
        meter = _unbounded()
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


class Allowance:
    """The units one request may spend on all its payloads' checks together; each check takes what it spent."""

    def __init__(self, units: int):
        self.units = units
        self.left = units

    def __repr__(self):
        return f"Allowance({self.left} of {self.units} units left)"


def first_error(compiled, payload, *, budget: int = DEFAULT_BUDGET,
                allowance: Allowance | None = None) -> ValidationError | None:
    """The first place (in path order) where `payload` breaks the schema, or None; TooCostly past `budget`, or past
    what is left of `allowance` (which is charged what the check spent, even when it stopped)."""
    limit = budget if allowance is None else max(0, min(budget, allowance.left))
    meter = _Meter(limit)
    token = _meter.set(meter)
    try:
        errors = sorted(compiled.iter_errors(payload), key=lambda e: list(e.absolute_path))
    except RecursionError:
        raise TooCostly(limit) from None
    finally:
        _meter.reset(token)
        if allowance is not None:
            allowance.left = max(0, allowance.left - (limit - meter.left))
    return errors[0] if errors else None

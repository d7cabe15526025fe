"""rules/json_schema and rules/schema_budget: what a catalog schema may cost, decided when it is stored
(json_schema.problem) and bounded when a payload is checked (schema_budget). Pure: no database, no network."""

import pytest
import referencing

from delivery.rules import json_schema
from delivery.rules.json_schema import TooCostly, problem
from delivery.rules.schema_budget import Allowance, compile_schema, first_error


def refused(schema) -> str:
    found = problem(schema)
    assert found is not None, schema
    return f"{found.where}: {found.reason}"


@pytest.mark.parametrize("reference", [
    "http://169.254.169.254/latest/meta-data.json", "https://10.0.0.1/x.json", "file:///etc/passwd",
    "https://json-schema.org/draft/2020-12/schema", "other.json", "#/$defs/missing", "#nowhere",
])
def test_a_reference_outside_the_schema_is_refused_and_never_fetched(reference):
    assert "does not resolve inside the schema (references are never fetched)" in refused({"$ref": reference})


def test_references_inside_the_schema_resolve():
    schema = {"$id": "https://shop.example/order", "$defs": {
        "money": {"type": "number"}, "sku": {"$id": "sku.json", "type": "string"}, "named": {"$anchor": "name"}},
        "properties": {"amount": {"$ref": "#/$defs/money"}, "sku": {"$ref": "sku.json"}, "n": {"$ref": "#name"}}}
    assert problem(schema) is None
    error = first_error(compile_schema(schema), {"amount": "x"})
    assert list(error.absolute_path) == ["amount"] and "is not of type 'number'" in error.message


@pytest.mark.parametrize("schema", [
    {"$ref": "#"},
    {"allOf": [{"$ref": "#"}]},
    {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"},
    {"properties": {"x": {"$ref": "#/properties/x"}}},
])
def test_a_reference_cycle_that_never_descends_is_refused(schema):
    assert "a reference cycle never descends into the payload" in refused(schema)


def test_a_recursion_through_the_payload_is_allowed_and_ends_with_it():
    tree = {"$defs": {"node": {"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}
    assert problem(tree) is None
    deep = {"children": [{"children": [{"children": "leaf"}]}]}
    assert list(first_error(compile_schema(tree), deep).absolute_path) == ["children", 0, "children", 0, "children"]


def test_a_fan_out_that_doubles_at_each_level_is_refused():
    levels = {f"l{n}": {"allOf": [{"$ref": f"#/$defs/l{n + 1}"}, {"$ref": f"#/$defs/l{n + 1}"}]} for n in range(20)}
    schema = {"$defs": {**levels, "l20": {"type": "string"}}, "$ref": "#/$defs/l0"}
    assert f"fans out to more than {json_schema.MAX_FAN_OUT} subschemas" in refused(schema)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)b", r"(?<!x)y"])
def test_a_regex_without_a_linear_time_match_is_refused(pattern):
    assert "catalog schemas use RE2" in refused({"pattern": pattern})
    assert "catalog schemas use RE2" in refused({"patternProperties": {pattern: {}}})


def test_a_backtracking_regex_runs_in_linear_time():
    compiled = compile_schema({"properties": {"s": {"pattern": "^(a+)+$"}},
                               "propertyNames": {"pattern": "^(a+)+$|^s$"}})
    assert first_error(compiled, {"s": "a" * 50_000 + "!"}).validator == "pattern"
    assert first_error(compiled, {"a" * 40 + "!": 1}).validator == "pattern"
    assert first_error(compiled, {"s": "a" * 50_000}) is None


def test_additional_properties_judge_names_by_re2():
    compiled = compile_schema({"patternProperties": {"^(a+)+$": {}}, "additionalProperties": False})
    assert first_error(compiled, {"aaaa": 1}) is None
    assert "'a…!' unexpected" not in first_error(compiled, {"a" * 40 + "!": 1}).message
    assert first_error(compiled, {"a" * 40 + "!": 1}).validator == "additionalProperties"


def test_unevaluated_properties_beside_pattern_properties_is_refused():
    assert "unevaluatedProperties cannot be combined with patternProperties" in refused(
        {"patternProperties": {"^x": {}}, "unevaluatedProperties": False})


def test_enum_and_unique_items_compare_as_json_does():
    enum = compile_schema({"enum": [1, "1", [1, {"a": None}], {"b": [True]}]})
    assert [first_error(enum, value) is None for value in (1.0, "1", [1, {"a": None}], {"b": [True]}, True,
                                                           [1, {"a": 0}], {"b": [1]})] == [
        True, True, True, True, False, False, False]
    unique = compile_schema({"uniqueItems": True})
    repeated = first_error(unique, [{"a": 1}, {"a": 1.0}])
    assert repeated.message == "has non-unique elements (item 1 repeats an earlier one)"
    assert first_error(unique, [1, True, "1", [1], {"1": 1}]) is None


def test_large_enums_and_unique_items_are_linear():
    schema = {"type": "array", "items": {"enum": list(range(9000))}, "uniqueItems": True}
    assert first_error(compile_schema(schema), list(range(9000)), budget=10**6) is None


def test_a_payload_past_its_budget_is_too_costly():
    compiled = compile_schema({"type": "array", "items": {"type": "integer"}})
    # a keyword spends 1 and the length of what it is given: type 101, items 101, each item's type 1
    assert first_error(compiled, list(range(100)), budget=302) is None
    with pytest.raises(TooCostly):
        first_error(compiled, list(range(100)), budget=301)


def test_the_payloads_of_one_request_share_one_allowance():
    compiled = compile_schema({"type": "array", "items": {"type": "integer"}})
    allowance = Allowance(700)
    assert first_error(compiled, list(range(100)), allowance=allowance) is None  # 302 units each
    assert first_error(compiled, list(range(100)), allowance=allowance) is None
    assert allowance.left == 96
    with pytest.raises(TooCostly):  # its own budget (20,000) would do; what the request has left does not
        first_error(compiled, list(range(100)), allowance=allowance)
    assert allowance.left == 0  # charged what it spent before it stopped
    assert first_error(compiled, [], allowance=Allowance(20_000), budget=2) is None  # the lower of the two bounds
    with pytest.raises(TooCostly):
        first_error(compiled, [1], allowance=Allowance(20_000), budget=2)


def test_errors_describing_a_large_value_spend_its_size():
    compiled = compile_schema({"allOf": [{"type": "string"}] * 50})
    with pytest.raises(TooCostly):  # fifty errors, each writing the whole list
        first_error(compiled, list(range(1000)), budget=20_000)


@pytest.mark.parametrize("schema, reason", [
    ({"$dynamicRef": "#meta"}, "$dynamicRef is not supported"),
    ({"type": "nonsense"}, "is not a valid JSON Schema (2020-12)"),
    ([1], "must be a JSON Schema"),
    ({"description": "x" * json_schema.MAX_SCHEMA_BYTES}, "must be at most"),
])
def test_other_refusals(schema, reason):
    assert reason in refused(schema)


def test_nesting_is_bounded():
    schema: dict = {"type": "string"}
    for _ in range(json_schema.MAX_DEPTH * 2 + 1):
        schema = {"items": {"allOf": [schema]}}
    assert "nested too deeply" in refused(schema)


def test_anchor_and_id_references_are_looked_up_not_crawled_on_each_use(monkeypatch):
    """The registry is crawled once, when the schema is compiled: a reference through an `$anchor` or an `$id`
    does not walk the whole schema again (62 KB of it took 16 s for 2,000 items)."""
    schema = {"$defs": {"a": {"$anchor": "a", "type": "integer"}, "b": {"$id": "urn:b", "type": "integer"}},
              "type": "array", "items": {"allOf": [{"$ref": "#a"}, {"$ref": "urn:b"}]}}
    compiled = compile_schema(schema)
    crawls = []
    original = referencing.Registry.crawl
    monkeypatch.setattr(referencing.Registry, "crawl", lambda self: crawls.append(1) or original(self))
    assert first_error(compiled, list(range(200))) is None
    assert list(first_error(compiled, [1, "x"]).absolute_path) == [1]
    assert crawls == []


@pytest.mark.parametrize("schema, payload", [
    ({"patternProperties": {f"^z{n}$": {} for n in range(1900)}}, {f"k{n}": 1 for n in range(300)}),
    ({"properties": {}, "patternProperties": {f"^z{n}$": {} for n in range(1900)}, "additionalProperties": False},
     {f"k{n}": 1 for n in range(300)}),
    ({"allOf": [{"pattern": "^((a*)*)*$"}] * 30}, "a" * 250_000),
    ({"$defs": {"c": {"const": [[999] * 12_500]}}, "allOf": [{"$ref": "#/$defs/c"}] * 30}, [[999] * 12_500]),
    ({"$defs": {"e": {"enum": [[1], [999] * 12_500]}}, "allOf": [{"$ref": "#/$defs/e"}] * 30}, [999] * 12_500),
])
def test_what_a_check_reads_is_charged_not_only_that_it_ran(schema, payload):
    """Names × patterns searches, the characters a regex reads, the values a comparison reads."""
    assert problem(schema) is None
    with pytest.raises(TooCostly):
        first_error(compile_schema(schema), payload, budget=20_000)


def test_boolean_subschemas_count_in_the_fan_out():
    assert "fans out" in refused({"patternProperties": {f"^z{n}$": True for n in range(3_800)}})


def test_what_pythons_own_checks_raise_is_a_refusal():
    assert "is not a valid JSON Schema" in refused({"pattern": "a{4294967296}"})
    assert "is not a valid JSON Schema" in refused({"propertyNames": {"pattern": "x{99999999999}"}})


def test_a_number_too_large_for_a_float_divisor_is_an_error_not_a_crash():
    error = first_error(compile_schema({"multipleOf": 0.5}), 10**400)
    assert error.validator == "multipleOf" and "too large to check" in error.message


@pytest.mark.parametrize("schema", [
    {"properties": {"name": {"$schema": "https://json-schema.org/draft/2020-12/schema", "pattern": "^(a+)+$"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#"},
])
def test_a_dialect_named_below_the_top_or_another_dialect_is_refused(schema):
    """jsonschema evaluates a part naming a dialect with that dialect's own validator, outside every bound here."""
    assert "$schema is allowed only at the top, naming JSON Schema 2020-12" in refused(schema)


def test_the_2020_12_dialect_named_at_the_top_keeps_every_bound_through_a_reference_to_the_root():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"n": {"properties": {
        "c": {"$ref": "#"}}}}, "$ref": "#/$defs/n", "properties": {"s": {"pattern": "^(a+)+$"}}}
    assert problem(schema) is None
    error = first_error(compile_schema(schema), {"c": {"c": {"s": "a" * 30 + "!"}}})  # RE2's answer, at once
    assert list(error.absolute_path) == ["c", "c", "s"] and error.validator == "pattern"


@pytest.mark.parametrize("schema", [
    {"properties": {"name": {"$ref": "#/$defs"}}, "$defs": {"maxLength": {}}},
    {"properties": {"name": {"$ref": "#/$defs/a/type"}}, "$defs": {"a": {"type": "string"}}},
    {"properties": {"name": {"$ref": "#/$defs/a/enum/0"}}, "$defs": {"a": {"enum": [{"type": "string"}]}}},
])
def test_a_reference_must_point_at_a_subschema(schema):
    assert "does not point at a subschema" in refused(schema)


@pytest.mark.parametrize("schema, payload", [
    ({"items": {"allOf": [{}] * 1998}}, [0] * 9_999),  # every branch a descent, each free of keywords
    ({"items": True, "unevaluatedItems": False}, [0] * 10_000),  # jsonschema's check is quadratic
])
def test_descents_and_quadratic_keywords_are_charged(schema, payload):
    assert problem(schema) is None
    with pytest.raises(TooCostly):
        first_error(compile_schema(schema), payload, budget=20_000)

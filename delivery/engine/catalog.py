"""The event type catalog: what an owner declares it publishes (name, description, JSON Schema, example,
deprecated), what tenants may choose from, and, where the owner asks for it per type, the check of a payload
against its schema when it is published (a 400 naming the path).

A schema is checked when it is stored (a valid 2020-12 schema of at most MAX_SCHEMA_BYTES) and compiled once per
process per schema text. References are resolved inside the schema only: nothing is fetched from the network.
"""

import json

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from delivery.engine.errors import ApplicationError
from subscriptions.models import EventType

MAX_SCHEMA_BYTES = 64 * 1024
MAX_EVENT_TYPES_PER_OWNER = 1000
_compiled: dict[str, Draft202012Validator] = {}
COMPILED_MAX = 1000


def schema_problem(schema) -> str | None:
    """Why `schema` cannot be stored, or None."""
    if schema is None:
        return None
    if not isinstance(schema, (dict, bool)):
        return "must be a JSON Schema: an object (or true/false)"
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        return f"must be at most {MAX_SCHEMA_BYTES} bytes as JSON"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        return f"is not a valid JSON Schema (2020-12){' at ' + where if where else ''}: {exc.message[:300]}"
    return None


def entry_problems(schema, example, validate_payloads: bool) -> dict[str, str]:
    """{field: reason} for an event type as it would be stored: a valid schema, an example that matches it, a schema
    to validate against. The API's serializer and the admin's form both ask this."""
    problem = schema_problem(schema)
    if problem:
        return {"schema": problem}
    found = {}
    mismatch = payload_problem(schema, example) if schema is not None and example is not None else None
    if mismatch:
        found["example"] = f"does not match the schema: {mismatch.replace('payload', 'example', 1)}"
    if validate_payloads and schema is None:
        found["validate_payloads"] = "needs a schema to validate against"
    return found


def validator(schema) -> Draft202012Validator:
    text = json.dumps(schema, sort_keys=True)
    found = _compiled.get(text)
    if found is None:
        if len(_compiled) >= COMPILED_MAX:
            _compiled.clear()
        found = _compiled[text] = Draft202012Validator(schema)
    return found


def payload_problem(schema, payload) -> str | None:
    """The first place where `payload` breaks `schema`, as `payload.items[0].sku: 'x' is not of type 'integer'`."""
    error = next(iter(sorted(validator(schema).iter_errors(payload), key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return None
    path = "payload" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    return f"{path}: {error.message[:300]}"


def refusals(owner_id: int, entries) -> dict[int, ApplicationError]:
    """{index: 400} for the entries whose event type the owner validates and whose payload does not match its
    schema. One query for the batch, and only when the owner validates some type."""
    types = {entry.event_type for entry in entries}
    schemas = dict(EventType.objects.filter(owner_id=owner_id, name__in=types, validate_payloads=True)
                   .exclude(schema=None).values_list("name", "schema"))
    refused = {}
    for n, entry in enumerate(entries):
        if entry.event_type in schemas:
            problem = payload_problem(schemas[entry.event_type], entry.payload)
            if problem:
                refused[n] = ApplicationError(f"does not match the schema of {entry.event_type!r}: {problem}",
                                              field="payload")
    return refused


def tenant_choice_problem(owner_id: int, event_types) -> str | None:
    """Why a tenant may not choose `event_types` (a subscription's), or None. An owner without a catalog opens
    whole topics; with one, a tenant names the types it wants, each open to tenants and not deprecated."""
    offered = set(EventType.objects.filter(owner_id=owner_id, open_to_tenants=True, deprecated=False)
                  .values_list("name", flat=True))
    if not offered and not EventType.objects.filter(owner_id=owner_id).exists():
        return None
    if not event_types:
        return "choose the event types to receive from the catalog (GET /api/event-types/)"
    unknown = [name for name in event_types if name not in offered]
    if unknown:
        return f"not in the catalog of event types you may choose: {', '.join(repr(n) for n in unknown[:5])}"
    return None

"""The event type catalog: what an owner declares it publishes (name, description, JSON Schema, example,
deprecated), what tenants may choose from, and, where the owner asks for it per type, the check of a payload
against its schema when it is published (a 400 naming the path).

A schema is checked when it is stored (`rules.json_schema`): references resolve inside the schema only (nothing
is ever fetched), regular expressions run on RE2, and a schema whose evaluation could not end or fans out without
bound is refused. It is compiled once per process per schema text, and a payload's check spends at most
HERALD_SCHEMA_CHECK_BUDGET units (`rules.schema_budget`); one that needs more is refused with a 400 saying so. The
payloads of one request (a batch's entries) share that budget.
"""

import json
from dataclasses import dataclass

from django.db.models import Case, F, JSONField, When
from django.urls import reverse

from delivery.conf import herald
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.plumbing.shortcuts import Statement
from delivery.rules import event_versions, json_schema, schema_budget
from subscriptions.models import EventType, EventTypeVersion

_compiled: dict[str, object] = {}
COMPILED_MAX = 1000


def schema_problem(schema) -> str | None:
    """Why `schema` cannot be stored, or None."""
    refused = json_schema.problem(schema)
    if refused is None:
        return None
    return f"{refused.reason}{f' (at {refused.where})' if refused.where else ''}"


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


def validator(schema):
    """The compiled schema, or the SchemaRefused that a schema stored before today's rules earns (checked once)."""
    text = json.dumps(schema, sort_keys=True)
    found = _compiled.get(text)
    if found is None:
        if len(_compiled) >= COMPILED_MAX:
            _compiled.clear()
        found = _compiled[text] = json_schema.problem(schema) or schema_budget.compile_schema(schema)
    return found


def payload_problem(schema, payload) -> str | None:
    """The first place where `payload` breaks `schema`, as `payload.items[0].sku: 'x' is not of type 'integer'`."""
    found = _check(schema, payload)
    return None if found is None else found[1] if found[0] == MISMATCH else f"payload: {found[1]}"


MISMATCH, UNCHECKED, SPENT = "mismatch", "unchecked", "spent"  # what a check found, when not a match


def _check(schema, payload, allowance: schema_budget.Allowance | None = None) -> tuple[str, str] | None:
    """None if `payload` matches `schema`; else (MISMATCH, UNCHECKED: the payload cannot be checked, or SPENT: the
    request's `allowance` ran out before this payload's check could end; why)."""
    compiled = validator(schema)
    if isinstance(compiled, json_schema.SchemaRefused):
        return UNCHECKED, f"cannot be checked: its schema is no longer accepted ({compiled.reason}); store it anew"
    budget = int(herald.SCHEMA_CHECK_BUDGET)
    shared = allowance is not None and allowance.left < budget  # others of the request spent some already
    spent = (SPENT, f"was not checked against its schema: the entries before it in this request spent the {budget} "
                    f"units of evaluation one request may (HERALD_SCHEMA_CHECK_BUDGET); publish it in another request")
    if shared and allowance.left == 0:
        return spent
    try:
        error = schema_budget.first_error(compiled, payload, budget=budget, allowance=allowance)
    except schema_budget.TooCostly:
        return spent if shared else (UNCHECKED, f"is too large or too complex to check against its schema: it needs "
                                                f"more than {budget} units of evaluation (HERALD_SCHEMA_CHECK_BUDGET)")
    if error is None:
        return None
    path = "payload" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    return MISMATCH, f"{path}: {error.message[:300]}"


COMPILED_ARITY_MAX = 16  # a batch naming more types than this asks through the ORM
_TYPES: dict[int, Statement] = {}  # one compiled statement per number of event types asked about


@dataclass(frozen=True)
class Types:
    """What a publish needs of the owner's catalog about the event types it names: `versions` {type: {version
    name: its schema}} of those with versions, `validating` {type: (schema, on_mismatch)} of those that check
    payloads against a schema."""

    versions: dict[str, dict[str, object]]
    validating: dict[str, tuple[object, str]]


def _types_and_versions(owner_id, names):
    """A row per type and version: (name, its schema where it validates payloads, on_mismatch, version name, the
    version's schema). A schema only documenting its type is not read: it may be 64 KB, on every publish."""
    return EventType.objects.filter(owner_id=owner_id, name__in=names).annotate(
        checked_schema=Case(When(validate_payloads=True, then=F("schema")), default=None, output_field=JSONField()),
    ).values_list("name", "checked_schema", "on_mismatch", "versions__name", "versions__schema")


def types_of(owner_id: int, names) -> Types:
    """The owner's catalog about `names`, one query (none for no names), through a statement compiled once per
    process for the usual publish (a few types, an owner keyed by an integer): the ORM's compiling of it cost the
    steady publish a millisecond of web CPU, and asking for the versions and the schemas apart a round trip."""
    names = sorted(set(names))
    if not names:
        return Types({}, {})
    if type(owner_id) is not int or len(names) > COMPILED_ARITY_MAX:
        rows = list(_types_and_versions(owner_id, names))
    else:
        rows = _types_statement(len(names)).rows(owner_id, *names)
    versions: dict[str, dict[str, object]] = {}
    validating: dict[str, tuple[object, str]] = {}
    for name, schema, on_mismatch, version, version_schema in rows:
        if schema is not None:
            validating[name] = (schema, on_mismatch)
        if version is not None:
            versions.setdefault(name, {})[version] = version_schema
    return Types(versions, validating)


def _types_statement(count: int) -> Statement:
    if count not in _TYPES:
        _TYPES[count] = Statement(lambda owner, *names: _types_and_versions(owner, names), int, *[str] * count)
    return _TYPES[count]


def refusals(known: Types, entries, schemas: dict | None = None) -> tuple[dict[int, ApplicationError], dict[int, str]]:
    """For the entries whose event type the owner validates (`known`, from `types_of`) and whose payload does not
    match its schema (or could not be checked within its budget): ({index: 400} where the type refuses, {index:
    why} where it records the mismatch and delivers). The entries share one budget, HERALD_SCHEMA_CHECK_BUDGET (a
    batch costs what one publish may): one whose check it could not finish is refused (413) whatever its type does
    with a mismatch, and may be published in another request."""
    checked = known.validating
    if not checked:
        return {}, {}
    refused, recorded = {}, {}
    allowance = schema_budget.Allowance(int(herald.SCHEMA_CHECK_BUDGET))
    for n, entry in enumerate(entries):
        if entry.event_type in checked:
            schema, on_mismatch = checked[entry.event_type]
            schema = (schemas or {}).get(n) or schema  # a versioned type: the payload's version's, if it has one
            found = _check(schema, entry.payload, allowance)
            if found is None:
                continue
            what, why = found
            reason = (f"does not match the schema of {entry.event_type!r}: {why}" if what == MISMATCH
                      else f"a payload of {entry.event_type!r} {why}")
            if what == SPENT:
                refused[n] = ApplicationError(reason, field="payload", status_code=413)
            elif on_mismatch == "record":
                recorded[n] = reason[:512]
            else:
                refused[n] = ApplicationError(reason, field="payload")
    return refused, recorded


def tenant_choice_problem(owner_id: int, event_types) -> str | None:
    """Why a tenant may not choose `event_types` (a subscription's), or None. An owner without a catalog opens
    whole topics; with one, a tenant names the types it wants, each open to tenants and not deprecated."""
    offered = set(EventType.objects.filter(owner_id=owner_id, open_to_tenants=True, deprecated=False)
                  .values_list("name", flat=True))
    if not offered and not EventType.objects.filter(owner_id=owner_id).exists():
        return None
    if not event_types:
        return f"choose the event types to receive from the catalog (GET {reverse('herald:eventtype-list')})"
    unknown = [name for name in event_types if name not in offered]
    if unknown:
        return f"not in the catalog of event types you may choose: {', '.join(repr(n) for n in unknown[:5])}"
    return None


def versions_published(known: Types, entries) -> tuple[dict[int, ApplicationError], dict[int, tuple[str, object]]]:
    """Which version each entry's payload is in (docs/versions.md), from `known` (`types_of`): ({index: 400} for a
    version its type does not have, {index: (version, its schema)} for each entry of a type with versions: the one
    it names, else the latest)."""
    refused, resolved = {}, {}
    for n, entry in enumerate(entries):
        names = known.versions.get(entry.event_type, {})
        problem = event_versions.published_problem(list(names), entry.event_version, entry.event_type)
        if problem:
            refused[n] = ApplicationError(problem, field="event_version")
        elif names:
            name = entry.event_version or event_versions.latest(list(names))
            resolved[n] = (name, names[name])
    return refused, resolved


def down_converters(owners, types=None, *, open_only: bool = False) -> dict[tuple[int, str], list]:
    """{(owner, event type): its versions as event_versions.Version, oldest first} of `owners`' catalogs (of `types`
    only, when given; of types open to tenants only, with `open_only`): one query. The worker's and the previews'
    one reader of the down-converters."""
    rows = EventTypeVersion.objects.filter(event_type__owner_id__in=set(owners))
    if types is not None:
        rows = rows.filter(event_type__name__in=set(types))
    if open_only:
        rows = rows.filter(event_type__open_to_tenants=True)
    found: dict[tuple[int, str], list] = {}
    for owner, type_name, name, code in rows.order_by("event_type__name", "name").values_list(
            "event_type__owner_id", "event_type__name", "name", "down_converter"):
        found.setdefault((owner, type_name), []).append(event_versions.Version(name, code))
    return found


def latest_version(owner_id: int) -> str:
    """The latest version name of the owner's catalog ("" if it has none): a new subscription's pin."""
    return event_versions.latest(list(EventTypeVersion.objects.filter(event_type__owner_id=owner_id)
                                      .values_list("name", flat=True).distinct()))


def checked_pin(owner_id: int, pin) -> str:
    """A subscription's event version as stored: "" (the latest) or a version name of the owner's catalog."""
    if pin in (None, ""):
        return ""
    if not isinstance(pin, str) or not EventTypeVersion.objects.filter(event_type__owner_id=owner_id,
                                                                      name=pin).exists():
        raise ApplicationError(f"{str(pin)[:64]!r} is not a version of any event type of the catalog",
                               field="event_version")
    return pin


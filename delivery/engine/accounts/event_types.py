"""The catalog's entries: create, change and delete an owner's event types, the API's and the admin's doors alike.

An entry's rules are rules/catalog_entry.py's (its name and description) and catalog.entry_problems's (its schema
and example); a breach is a 400 naming each field. A tenant's subscription names the types it chose, so a type a
tenant chose is not renamed or deleted under it (its list would name a type the catalog no longer has, refused
on its next save): a 409 naming the subscriptions and tenants that chose it. Deprecating it is the way out: they
keep it, new choices cannot take it.
"""

from django.db import IntegrityError, connection, transaction

from delivery.engine.accounts import catalog, quotas
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules import catalog_entry, event_versions
from delivery.transport import transforms
from subscriptions.models import EVENT_VERSION_VALIDATOR, EventType, EventTypeVersion, Subscription

FIELDS = ("name", "description", "schema", "example", "validate_payloads", "on_mismatch", "deprecated",
          "open_to_tenants")
NAMED_AT_MOST = 20


def problems(*, changes: dict, event_type: EventType | None = None) -> dict[str, str]:
    """{field: reason} for each rule the entry would break with `changes` applied (to `event_type`, or new)."""
    found = catalog_entry.problems(changes)
    if event_type is None or changes.keys() & {"schema", "example", "validate_payloads"}:
        after = {name: getattr(event_type, name, None) for name in FIELDS} | changes
        found.update(catalog.entry_problems(after["schema"], after["example"], bool(after["validate_payloads"])))
    return found


def chosen_by(event_type: EventType) -> list[tuple[int, str]]:
    """(subscription id, tenant's external id) of the owner's tenants' subscriptions that chose the type by name."""
    subscriptions = Subscription.objects.filter(topic__owner_id=event_type.owner_id, tenant__isnull=False)
    if connection.features.supports_json_field_contains:
        subscriptions = subscriptions.filter(event_types__contains=[event_type.name])
    rows = subscriptions.order_by("id").values_list("id", "tenant__external_id", "event_types")
    return [(id_, tenant) for id_, tenant, chosen in rows if event_type.name in (chosen or [])]


def in_use_refusal(event_type: EventType, doing: str, field: str | None = None) -> ApplicationError | None:
    """The 409 for renaming or deleting a type that tenants chose, or None."""
    users = chosen_by(event_type)
    if not users:
        return None
    tenants = sorted({tenant for _, tenant in users})
    named = ", ".join(repr(t) for t in tenants[:NAMED_AT_MOST]) + (" …" if len(tenants) > NAMED_AT_MOST else "")
    return ApplicationError(
        f"{len(users)} subscription(s) of your tenants ({named}) chose {event_type.name!r}; {doing} it would leave "
        f"their lists naming a type your catalog no longer has. Deprecate it instead (they keep it, new "
        f"subscriptions cannot choose it), or have them choose other types first.",
        field=field, status_code=409,
        extra={"subscriptions": [id_ for id_, _ in users][:100], "tenants": tenants[:100]})


def event_type_create(*, owner, **fields) -> EventType:
    found = problems(changes=fields)
    if found:
        raise ApplicationError.of_problems(found)
    quotas.event_types(owner)
    return _saved(EventType(owner=owner, **fields))


def event_type_update(*, event_type: EventType, **changes) -> EventType:
    found = problems(changes=changes, event_type=event_type)
    if found:
        raise ApplicationError.of_problems(found)
    with transaction.atomic():
        if changes.get("name", event_type.name) != event_type.name:
            refusal = in_use_refusal(event_type, "renaming", field="name")
            if refusal:
                raise refusal
        for name, value in changes.items():
            setattr(event_type, name, value)
        return _saved(event_type)


def event_type_delete(*, event_type: EventType) -> None:
    with transaction.atomic():
        refusal = in_use_refusal(event_type, "deleting")
        if refusal:
            raise refusal
        event_type.delete()


def _saved(event_type: EventType) -> EventType:
    """Saved, or a 409 when the name is one the catalog already has (a create or a rename)."""
    try:
        with transaction.atomic():
            event_type.save()
    except IntegrityError:
        raise ApplicationError("Your catalog already has this event type.", field="name", status_code=409) from None
    return event_type


def version_problems(event_type: EventType, name, schema, example, down_converter) -> dict[str, str]:
    """{field: reason} for a new version of `event_type` (docs/versions.md): a name that sorts after its others, a
    schema and example as an entry's, and a down-converter that compiles (none for the first version)."""
    if not isinstance(name, str) or not EVENT_VERSION_VALIDATOR.regex.match(name):
        return {"name": EVENT_VERSION_VALIDATOR.message}
    if not isinstance(down_converter, str):
        return {"down_converter": "must be a string of JavaScript"}
    names = list(event_type.versions.values_list("name", flat=True))
    found = event_versions.new_version_problem(names, name, down_converter)
    found.update(catalog.entry_problems(schema, example, validate_payloads=False))
    if down_converter.strip() and "down_converter" not in found:
        compiled = transforms.check(down_converter)
        if not compiled.ok:
            found["down_converter"] = f"line {compiled.line}: {compiled.error}" if compiled.line else compiled.error
    return found


def event_version_create(*, event_type: EventType, name: str, schema=None, example=None,
                         down_converter: str = "") -> EventTypeVersion:
    """A new version of `event_type`, after its others. The subscriptions of its owner that follow the latest
    (no version pinned) are pinned to the version that was the latest until now, so that none of them receives a
    new shape it was not built for: a subscription moves to a newer version when its owner (or tenant) says so."""
    with transaction.atomic():
        EventType.objects.select_for_update().filter(pk=event_type.pk).first()  # one new version at a time
        found = version_problems(event_type, name, schema, example, down_converter)
        if found:
            raise ApplicationError.of_problems(found)
        until_now = catalog.latest_version(event_type.owner_id)
        version = EventTypeVersion.objects.create(event_type=event_type, name=name, schema=schema, example=example,
                                                  down_converter=down_converter)
        if until_now:
            Subscription.objects.filter(topic__owner_id=event_type.owner_id, event_version="").update(
                event_version=until_now)
    return version


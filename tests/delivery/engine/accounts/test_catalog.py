"""engine/accounts/catalog.py's read for a publish (`types_of`): what the owner's catalog says of the event types
named, versions and schemas to check against, in one statement; the schema checks themselves are tested through
the API (tests/delivery/web/api/test_event_types.py) and the versions in tests/delivery/test_event_versions.py."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from delivery.engine.accounts import catalog
from subscriptions.models import EventType, EventTypeVersion

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "required": ["id"]}


def test_versions_and_schemas_come_from_one_statement(user, other_user):
    validated = EventType.objects.create(owner=user, name="order.paid", schema=SCHEMA, validate_payloads=True,
                                         on_mismatch="record")
    versioned = EventType.objects.create(owner=user, name="order.created", schema=SCHEMA)
    EventTypeVersion.objects.create(event_type=versioned, name="2026-01-01", schema={"type": "object"})
    EventTypeVersion.objects.create(event_type=versioned, name="2026-06-01", schema=None)
    EventTypeVersion.objects.create(event_type=validated, name="v1", schema=SCHEMA)
    EventType.objects.create(owner=user, name="order.shipped", validate_payloads=False, schema=SCHEMA)
    EventType.objects.create(owner=other_user, name="order.refunded", schema=SCHEMA, validate_payloads=True)
    names = ["order.paid", "order.created", "order.shipped", "order.refunded", "unknown", "order.paid"]
    for _ in range(3):  # compiled once, then prepared: the same answer each time
        with CaptureQueriesContext(connection) as statements:
            known = catalog.types_of(user.id, iter(names))
        assert len(statements.captured_queries) == 1
        assert known.validating == {"order.paid": (SCHEMA, "record")}  # not another owner's, nor one not checking
        assert known.versions == {"order.created": {"2026-01-01": {"type": "object"}, "2026-06-01": None},
                                  "order.paid": {"v1": SCHEMA}}


def test_a_schema_that_only_documents_its_type_is_not_read(user):
    EventType.objects.create(owner=user, name="order.shipped", validate_payloads=False, schema=SCHEMA)
    EventType.objects.create(owner=user, name="order.paid", validate_payloads=True, schema=SCHEMA)
    rows = {row[0]: row for row in catalog._types_statement(2).rows(user.id, "order.paid", "order.shipped")}
    assert rows["order.shipped"][1] is None and rows["order.paid"][1] == SCHEMA


def test_no_names_asks_nothing(user):
    with CaptureQueriesContext(connection) as statements:
        assert catalog.types_of(user.id, []) == catalog.Types({}, {})
    assert statements.captured_queries == []


def test_more_names_than_a_compiled_statement_takes_ask_through_the_orm(user):
    EventType.objects.create(owner=user, name="t.0", schema=SCHEMA, validate_payloads=True)
    names = [f"t.{n}" for n in range(catalog.COMPILED_ARITY_MAX + 1)]
    assert catalog.types_of(user.id, names).validating == {"t.0": (SCHEMA, "refuse")}

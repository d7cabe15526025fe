"""The catalog's page (console/event_types.py): entries made, changed and deleted through the services the API
calls, their rules checked there; a rename or delete under tenants that chose the type refused and shown; versions
added through the service from the type's page, in order, and never changed or deleted."""

import pytest

from delivery.engine.accounts import event_types
from subscriptions.models import EventType, EventTypeVersion
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.delivery.web.api.shop import tenant_chooses
from tests.delivery.web.console.pages import form_errors, shown_messages, words

pytestmark = pytest.mark.django_db
shop = shop_fixture

EVENT_TYPES = "/admin/herald_subscriptions/eventtype/"
VERSIONS = "/admin/herald_subscriptions/eventtypeversion/"
TO_JANUARY = ("function handler(webhook) {\r\n  webhook.payload = {name: webhook.payload.full_name};\r\n"
              "  return webhook;\r\n}")


def entry(user, **fields) -> dict:
    return {"owner": user.id, "name": "order.created", "description": "", "schema": "null", "example": "null",
            "on_mismatch": "refuse", **fields}


def test_the_catalog_refuses_a_bad_schema(admin_client, user):
    refused = admin_client.post(EVENT_TYPES + "add/", {
        "owner": user.id, "name": "order.created", "schema": '{"type": "nonsense"}', "example": "null"})
    assert refused.status_code == 200 and "not a valid JSON Schema" in refused.content.decode()
    assert not EventType.objects.exists()


def test_an_entry_is_made_with_a_schema_and_an_example_that_matches_it(admin_client, user):
    made = admin_client.post(EVENT_TYPES + "add/", entry(
        user, schema='{"type": "object", "required": ["order"]}', example='{"order": 7}', validate_payloads="on"))
    assert (made.status_code, made.url) == (302, EVENT_TYPES)
    stored = EventType.objects.get()
    assert (stored.owner, stored.schema, stored.example, stored.validate_payloads, stored.open_to_tenants) == (
        user, {"type": "object", "required": ["order"]}, {"order": 7}, True, False)

    mismatch = admin_client.post(f"{EVENT_TYPES}{stored.id}/change/", entry(
        user, schema='{"type": "object", "required": ["order"]}', example='{"lines": []}', validate_payloads="on"))
    assert list(form_errors(mismatch.content.decode())) == ["example"]
    assert EventType.objects.get().example == {"order": 7}


def test_the_owner_of_an_entry_is_read_only_once_made(admin_client, user):
    event_type = event_types.event_type_create(owner=user, name="order.created")
    page = admin_client.get(f"{EVENT_TYPES}{event_type.id}/change/").content.decode()
    assert 'name="owner"' not in page and 'name="name"' in page


@pytest.fixture
def chosen(shop, user):
    """order.created in Alice's catalog, chosen by tenant acme's subscription."""
    event_type = event_types.event_type_create(owner=user, name="order.created")
    tenant_chooses(shop, "acme", "order.created")
    return event_type


def test_a_type_a_tenant_chose_is_not_renamed_under_it(admin_client, user, chosen):
    page = admin_client.post(f"{EVENT_TYPES}{chosen.id}/change/", entry(user, name="order.placed"))
    assert form_errors(page.content.decode()) == {"name": [
        "1 subscription(s) of your tenants (&#x27;acme&#x27;) chose &#x27;order.created&#x27;; renaming it would "
        "leave their lists naming a type your catalog no longer has. Deprecate it instead (they keep it, new "
        "subscriptions cannot choose it), or have them choose other types first."]}
    assert EventType.objects.get(id=chosen.id).name == "order.created"


def test_a_refused_delete_comes_back_to_the_entry_saying_why(admin_client, chosen):
    response = admin_client.post(f"{EVENT_TYPES}{chosen.id}/delete/", {"post": "yes"}, follow=True)
    assert response.redirect_chain == [(f"{EVENT_TYPES}{chosen.id}/change/", 302)]
    assert shown_messages(response) == [("error", (
        "1 subscription(s) of your tenants ('acme') chose 'order.created'; deleting it would leave their lists "
        "naming a type your catalog no longer has. Deprecate it instead (they keep it, new subscriptions cannot "
        "choose it), or have them choose other types first."))]
    assert EventType.objects.filter(id=chosen.id).exists()


def test_a_type_no_tenant_chose_is_deleted(admin_client, user):
    event_type = event_types.event_type_create(owner=user, name="order.shipped")
    response = admin_client.post(f"{EVENT_TYPES}{event_type.id}/delete/", {"post": "yes"})
    assert (response.status_code, response.url) == (302, EVENT_TYPES)
    assert not EventType.objects.exists()


def version(event_type, **fields) -> dict:
    return {"event_type": event_type.id, "name": "2026-01-01", "schema": "null", "example": "null",
            "down_converter": "", **fields}


def test_versions_are_added_from_the_types_page_in_order_through_the_service(admin_client, user):
    customer = event_types.event_type_create(owner=user, name="customer.created")
    page = admin_client.get(f"{EVENT_TYPES}{customer.id}/change/").content.decode()
    assert "Versions: none yet. Add a version" in words(page)
    assert f'href="{VERSIONS}add/?event_type={customer.id}"' in page
    prefilled = admin_client.get(f"{VERSIONS}add/?event_type={customer.id}").content.decode()
    assert f'value="{customer.id}" selected' in prefilled
    made = admin_client.post(VERSIONS + "add/", version(customer, example='{"name": "Ada"}'))
    assert (made.status_code, made.url) == (302, VERSIONS)
    missing = admin_client.post(VERSIONS + "add/", version(customer, name="2026-06-01"))
    assert list(form_errors(missing.content.decode())) == ["down_converter"]
    early = admin_client.post(VERSIONS + "add/", version(customer, name="2025-06-01", down_converter=TO_JANUARY))
    assert "versions come in order" in form_errors(early.content.decode())["name"][0]
    broken = admin_client.post(VERSIONS + "add/", version(customer, name="2026-06-01",
                                                          down_converter="function handler(w) {\n  return w"))
    assert form_errors(broken.content.decode())["down_converter"][0].startswith("line 2: SyntaxError")
    assert admin_client.post(VERSIONS + "add/", version(customer, name="2026-06-01",
                                                        down_converter=TO_JANUARY)).status_code == 302
    stored = EventTypeVersion.objects.get(name="2026-06-01")
    assert stored.down_converter == TO_JANUARY.replace("\r\n", "\n")  # as a browser's lines, kept as code's
    assert EventTypeVersion.objects.get(name="2026-01-01").example == {"name": "Ada"}
    page = admin_client.get(f"{EVENT_TYPES}{customer.id}/change/").content.decode()
    assert f'<a href="{VERSIONS}{stored.id}/change/">2026-06-01</a>' in page


def test_a_version_is_read_never_changed_or_deleted(admin_client, user):
    customer = event_types.event_type_create(owner=user, name="customer.created")
    stored = event_types.event_version_create(event_type=customer, name="2026-01-01", example={"name": "Ada"})
    page = admin_client.get(f"{VERSIONS}{stored.id}/change/")
    assert page.status_code == 200 and 'name="name"' not in page.content.decode()  # read-only
    assert admin_client.post(f"{VERSIONS}{stored.id}/change/", version(customer, name="2026-02-01")).status_code == 403
    assert admin_client.post(f"{VERSIONS}{stored.id}/delete/", {"post": "yes"}).status_code == 403
    assert EventTypeVersion.objects.get().name == "2026-01-01"
    listed = admin_client.get(VERSIONS, {"q": "customer"}).content.decode()
    assert "customer.created" in listed and "2026-01-01" in listed and "alice" in listed

"""Console forms that write through the services (console/service_forms.py): the service's write is the form's last
check, its refusal shown on the fields it names (or above the form when it names none), every error at once, and
nothing written while any error stands."""

import pytest

from subscriptions.models import EventType, Topic
from tests.delivery.web.console.pages import form_errors

pytestmark = pytest.mark.django_db

EVENT_TYPES = "/admin/herald_subscriptions/eventtype/"


def event_type_form(user, **fields) -> dict:
    return {"owner": user.id, "name": "order.created", "description": "", "schema": "null", "example": "null",
            "on_mismatch": "refuse", **fields}


def test_the_console_shows_every_error_at_once(admin_client, user):
    """A field the form itself refuses does not hide what the service says of the others (it is asked too, and
    what it wrote is rolled back)."""
    page = admin_client.post(EVENT_TYPES + "add/", {
        "owner": user.id, "name": "a.d", "description": "d" * 1001, "schema": "null", "example": "null"})
    assert form_errors(page.content.decode()) == {"description": ["must be at most 1000 characters"],
                                                  "on_mismatch": ["This field is required."]}
    assert not EventType.objects.exists()


def test_what_the_service_wrote_is_rolled_back_while_the_forms_own_error_stands(admin_client, user):
    page = admin_client.post(EVENT_TYPES + "add/", event_type_form(user, on_mismatch="never"))
    assert form_errors(page.content.decode()) == {
        "on_mismatch": ["Select a valid choice. never is not one of the available choices."]}
    assert not EventType.objects.exists()  # the service was asked (and would have made it): nothing kept


def test_a_refusal_naming_several_fields_is_shown_on_each(admin_client, user):
    page = admin_client.post(EVENT_TYPES + "add/", event_type_form(
        user, name="herald.test", schema='{"type": "nonsense"}'))
    errors = form_errors(page.content.decode())
    assert sorted(errors) == ["name", "schema"]
    assert "Herald&#x27;s own" in errors["name"][0] and "not a valid JSON Schema" in errors["schema"][0]
    assert not EventType.objects.exists()


def test_a_refusal_naming_no_field_is_shown_above_the_form(admin_client, user):
    EventType.objects.bulk_create(EventType(owner=user, name=f"type.{n}") for n in range(1000))  # a full catalog
    page = admin_client.post(EVENT_TYPES + "add/", event_type_form(user))
    assert form_errors(page.content.decode()) == {
        "__all__": ["Your catalog has 1000 event types, the most it may have."]}
    assert not EventType.objects.filter(name="order.created").exists()


def test_a_policy_refused_by_the_rules_is_shown_on_the_policy_field(admin_client, user):
    page = admin_client.post("/admin/herald_subscriptions/topic/add/", {
        "owner": user.id, "name": "orders", "description": "", "message_retention_days": "",
        "delivery_policy": '{"jitter": 7, "retryLimits": {"maxAttempts": 0}}'})
    assert form_errors(page.content.decode()) == {
        "delivery_policy": ["retryLimits.maxAttempts: must be at least 1", "jitter: must be at most 0.5"]}
    assert not Topic.objects.exists()


def test_the_row_saved_is_the_one_the_service_wrote(admin_client, user):
    made = admin_client.post(EVENT_TYPES + "add/", event_type_form(user, description="An order was placed"))
    event_type = EventType.objects.get()
    assert made.status_code == 302 and event_type.description == "An order was placed"
    edited = admin_client.post(f"{EVENT_TYPES}{event_type.id}/change/", event_type_form(
        user, description="An order was placed or imported"))
    assert edited.status_code == 302
    assert list(EventType.objects.values_list("id", "description")) == [(event_type.id,
                                                                         "An order was placed or imported")]

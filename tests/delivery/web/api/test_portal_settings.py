"""The portal settings resource (an owner's portal: name, logo, colour, frame ancestors, refresh URL, whether tenants
may write transformations): its rules, checked by the service the API and the admin both call."""

import pytest
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from delivery.engine.accounts import tenancy
from delivery.engine.plumbing.errors import ApplicationError
from subscriptions.models import Portal, Tenant
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture


@pytest.fixture
def link(shop):
    return tenancy.portal_link(Tenant.objects.get(external_id="acme"))


@pytest.mark.parametrize("body,field", [
    ({"frame_ancestors": ["https://app.alice.example\n"]}, "frame_ancestors"),
    ({"frame_ancestors": ["https://app.alice.example\r\nSet-Cookie: a=b"]}, "frame_ancestors"),
    ({"frame_ancestors": ["'self'\n"]}, "frame_ancestors"),
    ({"frame_ancestors": ["https://a.example\x0b"]}, "frame_ancestors"),
])
def test_portal_settings_refuse_line_breaks_and_control_characters(shop, link, client, body, field):
    response = shop["api"].patch("/api/portal/", body, format="json")
    assert response.status_code == 400 and list(response.json()) == [field], response.content
    assert client.get(link).status_code == 200


def test_the_colour_check_refuses_a_trailing_line_break():
    pattern = next(v for v in Portal._meta.get_field("colour").validators if isinstance(v, RegexValidator))
    pattern("#aa3300")
    with pytest.raises(ValidationError):
        pattern("#aa3300\n")


def test_a_control_character_is_named_as_such(shop):
    response = shop["api"].patch("/api/portal/", {"frame_ancestors": ["https://ok.example", "https://a.example\n"]},
                                 format="json")
    assert response.json()["frame_ancestors"] == ["[1]: must not contain control characters (found U+000A, a line "
                                                  "break)"]


def test_the_admin_refuses_what_the_api_refuses(admin_client, user):
    page = admin_client.post("/admin/herald_subscriptions/portal/add/", {
        "owner": user.id, "name": "Shop", "logo_url": "", "colour": "#aa3300",
        "frame_ancestors": '["https://app.alice.example\\n"]'})
    assert page.status_code == 200 and "control characters" in page.content.decode()
    page = admin_client.post("/admin/herald_subscriptions/portal/add/", {
        "owner": user.id, "name": "Shop", "logo_url": "", "colour": "#aa3300",
        "frame_ancestors": '["https://x; script-src *"]'})
    assert page.status_code == 200 and "not an origin" in page.content.decode()
    assert not Portal.objects.exists()
    saved = admin_client.post("/admin/herald_subscriptions/portal/add/", {
        "owner": user.id, "name": "Shop", "logo_url": "", "colour": "#aa3300",
        "frame_ancestors": '["https://app.alice.example"]'})
    assert saved.status_code == 302 and Portal.objects.get().frame_ancestors == ["https://app.alice.example"]


def test_an_owner_lets_its_tenants_write_transformations(shop, user):
    assert shop["api"].get("/api/portal/").json()["allow_transformations"] is False
    allowed = shop["api"].patch("/api/portal/", {"allow_transformations": True}, format="json")
    assert (allowed.status_code, allowed.json()["allow_transformations"]) == (200, True)
    assert Portal.objects.get(owner=user).allow_transformations is True
    refused = shop["api"].patch("/api/portal/", {"allow_transformations": "maybe"}, format="json")
    assert refused.status_code == 400 and list(refused.json()) == ["allow_transformations"]
    with pytest.raises(ApplicationError) as wrong:
        tenancy.portal_update(owner=user, allow_transformations="yes")  # a Python caller: the rules say so too
    assert wrong.value.as_payload() == {"allow_transformations": ["must be true or false"]}

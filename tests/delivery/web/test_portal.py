"""The tenant portal (delivery/web/portal.py) and its settings: what the owner may store (through the API and the
admin alike), pages that never fail on what is stored, the portal's headers on every answer (404s too), and the
portal's forms refusing what the API refuses, with the same reasons."""

import pytest
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from delivery.engine import tenancy
from subscriptions.models import Portal, Subscription, Tenant
from tests.subscriptions.test_tenants import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared


@pytest.fixture
def link(shop):
    return tenancy.portal_link(Tenant.objects.get(external_id="acme"))


def portal_headers(response) -> None:
    assert response["Cache-Control"] == "no-store", response.status_code
    assert "frame-ancestors" in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "no-referrer"


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


def test_pages_never_fail_on_settings_stored_before_the_rules(shop, link, client, user):
    Portal.objects.create(owner=user, colour="red;}\n", frame_ancestors=[
        "https://app.alice.example\n", "https://x; script-src *", 7, "https://ok.alice.example"])
    for page in ("", "event-types/", f"endpoints/{shop['acme']['subscription']['id']}/"):
        response = client.get(link + page)
        assert response.status_code == 200, (page, response.status_code)
        assert response["Content-Security-Policy"].startswith("frame-ancestors https://ok.alice.example;")
        assert "red;}" not in response.content.decode()


def test_not_found_answers_carry_the_portals_headers(shop, link, client):
    for path in (f"endpoints/{shop['globex']['subscription']['id']}/", "deliveries/999999/", "no-such-page/"):
        response = client.get(link + path)
        assert response.status_code == 404, path
        portal_headers(response)
    refused = client.get("/portal/not-a-token/no-such-page/")
    assert refused.status_code in (403, 404)
    portal_headers(refused)


def test_changing_the_url_refuses_a_long_one_with_the_apis_reason(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    long_url = "http://127.0.0.1:9/" + "a" * 2100
    api = shop["acme"]["client"].patch(f"/api/subscriptions/{sub}/", {"endpoint": long_url}, format="json")
    assert api.status_code == 400
    reason = api.json()["endpoint"][0]
    page = client.post(f"{link}endpoints/{sub}/move/", {"url": long_url})
    assert page.status_code == 400 and reason in page.content.decode()
    assert Subscription.objects.get(id=sub).endpoint.url == "http://127.0.0.1:9/acme"


@pytest.mark.parametrize("hours,accepted", [("0.0001", False), ("0.01", False), (str(1 / 60), True), ("1", True),
                                            ("720", True), ("720.01", False), ("nan", False), ("inf", False),
                                            ("-1", False), ("", False)])
def test_replay_in_the_portal_keeps_to_the_range_it_states(shop, link, client, hours, accepted):
    sub = shop["acme"]["subscription"]["id"]
    response = client.post(f"{link}endpoints/{sub}/replay/", {"hours": hours})
    if accepted:
        assert response.status_code == 302, response.content
    else:
        assert response.status_code == 400 and "between a minute and 30 days" in response.content.decode()

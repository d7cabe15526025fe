"""Who may open the portal and what every answer under `/portal/` carries (delivery/web/portal/access.py): the
signed link checked (forged, expired, read-only), the headers on every answer (a refusal's and a 404's too), the
per-answer script nonce, and the owner's stored settings read through their rules, including the refresh URL an
expired link leads to."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.conf import herald
from delivery.engine.accounts import tenancy
from subscriptions.models import Portal, Subscription, Tenant
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.delivery.web.portal.links import link as link_fixture
from tests.delivery.web.portal.links import portal_headers

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared
link = link_fixture  # Acme's portal link

POLICY = ("default-src 'self'; img-src 'self' https: data:; style-src 'self' 'unsafe-inline'; "
          "script-src 'nonce-{nonce}'; object-src 'none'; base-uri 'none'; form-action 'self'")


def nonce_of(response) -> str:
    return response["Content-Security-Policy"].split("script-src 'nonce-", 1)[1].split("'", 1)[0]


def test_a_page_is_framed_nowhere_unless_the_owner_names_where(shop, link, client, user):
    page = client.get(link)
    assert page.status_code == 200
    assert page["Content-Security-Policy"] == "frame-ancestors 'none'; " + POLICY.format(nonce=nonce_of(page))
    assert page["X-Frame-Options"] == "DENY"
    Portal.objects.create(owner=user, frame_ancestors=["https://app.alice.example"])
    framed = client.get(link)
    assert framed["Content-Security-Policy"] == ("frame-ancestors https://app.alice.example; "
                                                 + POLICY.format(nonce=nonce_of(framed)))
    assert "X-Frame-Options" not in framed  # CSP frame-ancestors decides
    assert (framed["Referrer-Policy"], framed["Cache-Control"]) == ("no-referrer", "no-store")


def test_pages_never_fail_on_settings_stored_before_the_rules(shop, link, client, user):
    Portal.objects.create(owner=user, colour="red;}\n", frame_ancestors=[
        "https://app.alice.example\n", "https://x; script-src *", 7, "https://ok.alice.example"])
    for page in ("", "event-types/", f"subscriptions/{shop['acme']['subscription']['id']}/"):
        response = client.get(link + page)
        assert response.status_code == 200, (page, response.status_code)
        assert response["Content-Security-Policy"].startswith("frame-ancestors https://ok.alice.example;")
        assert "red;}" not in response.content.decode()


def test_not_found_answers_carry_the_portals_headers(shop, link, client):
    for path in (f"subscriptions/{shop['globex']['subscription']['id']}/", "deliveries/999999/", "no-such-page/"):
        response = client.get(link + path)
        assert response.status_code == 404, path
        assert "There is no such page here." in response.content.decode()
        portal_headers(response)
    refused = client.get("/portal/not-a-token/no-such-page/")
    assert refused.status_code == 403 and "This link is not valid." in refused.content.decode()
    portal_headers(refused)


def test_a_page_that_only_takes_a_post_answers_a_get_with_the_portals_headers(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    response = client.get(f"{link}subscriptions/{sub}/pause/")
    assert response.status_code == 405 and response["Allow"] == "POST"
    portal_headers(response)
    assert Subscription.objects.get(id=sub).status == "confirmed"


def test_a_read_only_link_looks_and_changes_nothing(shop, client):
    sub = shop["acme"]["subscription"]["id"]
    looking = tenancy.portal_link(Tenant.objects.get(external_id="acme"), read_only=True)
    assert client.get(f"{looking}subscriptions/{sub}/").status_code == 200
    for path, body in ((f"subscriptions/{sub}/pause/", {}), (f"subscriptions/{sub}/delete/", {"confirm": "yes"}),
                       ("subscriptions/new/", {"url": "http://127.0.0.1:9/other"})):
        refused = client.post(looking + path, body)
        assert refused.status_code == 403, path
        assert '<p role="alert">This link lets you look, not change anything.</p>' in refused.content.decode()
        portal_headers(refused)
    assert list(Subscription.objects.filter(tenant__external_id="acme").values_list("id", "status")) == [
        (sub, "confirmed")]


def test_each_page_runs_only_its_own_script(shop, link, client):
    first, second = client.get(link), client.get(link)
    nonces = []
    for page in (first, second):
        nonce = nonce_of(page)
        assert f'<script nonce="{nonce}">' in page.content.decode()
        nonces.append(nonce)
    assert nonces[0] != nonces[1] and len(nonces[0]) >= 16


def expired_link(tenant, ago=timedelta(minutes=1)) -> str:
    return tenancy.portal_link(tenant, ttl=timedelta(minutes=5), now=timezone.now() - timedelta(minutes=5) - ago)


def test_an_expired_link_is_sent_to_the_refresh_url_and_a_forged_one_is_not(shop, client, user, settings):
    settings.HERALD_PORTAL_REFRESH_HOSTS = ["App.Alice.example"]  # the operator allows this host: a redirect
    acme = Tenant.objects.get(external_id="acme")
    expired = client.get(expired_link(acme))
    assert expired.status_code == 403 and "This link has expired" in expired.content.decode()
    portal_headers(expired)
    Portal.objects.create(owner=user, name="Alice's Shop", refresh_url="https://app.alice.example/webhooks")
    expired = client.get(expired_link(acme) + "subscriptions/1/")
    assert expired.status_code == 302 and expired["Location"] == "https://app.alice.example/webhooks"
    portal_headers(expired)
    token = expired_link(acme).rstrip("/").rsplit("/", 1)[1]
    forged = client.get(f"/portal/{token[:-2]}xx/")  # a signature Herald did not make: it names nobody
    assert forged.status_code == 403 and "Location" not in forged and "Alice" not in forged.content.decode()
    assert client.post(expired_link(acme) + "subscriptions/1/pause/").status_code == 403  # a browser's GET only
    long_ago = expired_link(acme, ago=timedelta(seconds=herald.PORTAL_LINK_MAX_SECONDS + 60))
    assert client.get(long_ago).status_code == 403  # an old link is no lasting redirect on Herald's host
    Portal.objects.filter(owner=user).update(refresh_url="javascript:alert(1)")  # stored before the rule
    assert client.get(expired_link(acme)).status_code == 403


def test_a_refresh_url_on_a_host_the_operator_did_not_allow_is_a_link_to_click_not_a_redirect(shop, client, user,
                                                                                                settings):
    """An owner's refresh_url is no open redirect on Herald's origin, which every owner shares: the expired link's
    page shows where it leads and the tenant clicks (docs/tenants.md, HERALD_PORTAL_REFRESH_HOSTS)."""
    acme = Tenant.objects.get(external_id="acme")
    Portal.objects.create(owner=user, name="Alice's Shop", refresh_url="https://evil.example/login?next=%2F")
    for allowed in ([], ["app.alice.example"], ["evil.example.app.alice.example"]):
        settings.HERALD_PORTAL_REFRESH_HOSTS = allowed
        page = client.get(expired_link(acme))
        body = page.content.decode()
        assert page.status_code == 403 and "Location" not in page, allowed
        assert "<strong>evil.example</strong>" in body
        assert '<a href="https://evil.example/login?next=%2F" rel="noreferrer">' in body
        assert "<body data-refresh" not in body and "http-equiv" not in body  # nothing goes there by itself
        portal_headers(page)
    settings.HERALD_PORTAL_REFRESH_HOSTS = ["evil.example"]  # what an operator allows is a redirect
    assert client.get(expired_link(acme))["Location"] == "https://evil.example/login?next=%2F"
    long_ago = client.get(expired_link(acme, ago=timedelta(seconds=herald.PORTAL_LINK_MAX_SECONDS + 60)))
    assert long_ago.status_code == 403 and "evil.example" not in long_ago.content.decode()  # no lasting link


# The refresh URL an expired link leads to, as the owner stores it (through the API and the admin alike).

@pytest.mark.parametrize("value,accepted", [
    ("https://app.alice.example/account/webhooks?tab=2", True), ("", True), ("http://127.0.0.1:8000/w", True),
    ("javascript:alert(1)", False), ("/relative/path", False), ("https://user:pw@app.alice.example/", False),
    ("https://app.alice.example/\r\nSet-Cookie: a=b", False), ("https://" + "a" * 2100 + ".example/", False),
    (["https://app.alice.example/"], False), ("https://app.alice.example/a b", False),
    ("http://app.alice.example/w", False), ("http://169.254.169.254/latest/meta-data/", False),
    ("https://app.alice.example:99999/", False), ("http://localhost:3000/webhooks", True)])
def test_the_refresh_url_is_an_absolute_web_address_or_nothing(shop, value, accepted):
    response = shop["api"].patch("/api/portal/", {"refresh_url": value}, format="json")
    if accepted:
        assert response.status_code == 200 and response.json()["refresh_url"] == value, response.content
    else:
        assert response.status_code == 400 and list(response.json()) == ["refresh_url"], response.content


def test_the_admin_checks_the_refresh_url_as_the_api_does(admin_client, user):
    page = admin_client.post("/admin/herald_subscriptions/portal/add/", {
        "owner": user.id, "name": "Shop", "logo_url": "", "colour": "", "frame_ancestors": "[]",
        "refresh_url": "https://user:pw@app.alice.example/"})
    assert page.status_code == 200 and "credentials" in page.content.decode()
    assert not Portal.objects.exists()

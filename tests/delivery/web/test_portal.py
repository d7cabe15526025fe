"""The tenant portal (delivery/web/portal.py) and its settings: what the owner may store (through the API and the
admin alike), pages that never fail on what is stored, the portal's headers on every answer (404s too), and the
portal's forms refusing what the API refuses, with the same reasons."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.conf import herald
from delivery.engine.accounts import tenancy
from subscriptions.models import Portal, Subscription, Tenant
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared


@pytest.fixture
def link(shop):
    return tenancy.portal_link(Tenant.objects.get(external_id="acme"))


def portal_headers(response) -> None:
    assert response["Cache-Control"] == "no-store", response.status_code
    assert "frame-ancestors" in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "no-referrer"


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
    page = client.post(f"{link}subscriptions/{sub}/move/", {"url": long_url})
    assert page.status_code == 400 and reason in page.content.decode()
    assert Subscription.objects.get(id=sub).endpoint.url == "http://127.0.0.1:9/acme"


@pytest.mark.parametrize("hours,accepted", [("0.0001", False), ("0.01", False), (str(1 / 60), True), ("1", True),
                                            ("720", True), ("720.01", False), ("nan", False), ("inf", False),
                                            ("-1", False), ("", False)])
def test_replay_in_the_portal_keeps_to_the_range_it_states(shop, link, client, hours, accepted):
    sub = shop["acme"]["subscription"]["id"]
    response = client.post(f"{link}subscriptions/{sub}/replay/", {"hours": hours})
    if accepted:
        assert response.status_code == 302, response.content
    else:
        assert response.status_code == 400 and "between a minute and 30 days" in response.content.decode()


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


def test_each_page_runs_only_its_own_script(shop, link, client):
    first, second = client.get(link), client.get(link)
    nonces = []
    for page in (first, second):
        nonce = page["Content-Security-Policy"].split("script-src 'nonce-", 1)[1].split("'", 1)[0]
        assert f'<script nonce="{nonce}">' in page.content.decode()
        nonces.append(nonce)
    assert nonces[0] != nonces[1] and len(nonces[0]) >= 16


def test_removing_an_endpoint_takes_a_second_step(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    asked = client.post(f"{link}subscriptions/{sub}/delete/")
    assert asked.status_code == 200 and "Remove this endpoint?" in asked.content.decode()
    assert Subscription.objects.filter(id=sub).exists()
    removed = client.post(f"{link}subscriptions/{sub}/delete/", {"confirm": "yes"})
    assert removed.status_code == 302 and not Subscription.objects.filter(id=sub).exists()


OWNER_TUNING = ("delivery_policy", "effective_delivery_policy", "effective_delivery_policy_sources",
                "max_events_per_batch", "preferred_batch_size_kb")


def test_a_tenant_key_sees_and_sets_no_owner_tuning(shop):
    acme, sub = shop["acme"]["client"], shop["acme"]["subscription"]
    assert not set(OWNER_TUNING) & set(sub)  # the create's answer
    assert not set(OWNER_TUNING) & set(acme.get(f"/api/subscriptions/{sub['id']}/").json())
    assert not set(OWNER_TUNING) & set(acme.get("/api/subscriptions/").json()["results"][0])
    for name, value in (("delivery_policy", {"healthyRetryPolicy": {"numRetries": 1}}),
                        ("max_events_per_batch", 10), ("preferred_batch_size_kb", 64)):
        refused = acme.patch(f"/api/subscriptions/{sub['id']}/", {name: value}, format="json")
        assert refused.status_code == 400 and list(refused.json()) == [name], refused.content
        assert "set by the owner" in refused.json()[name][0]
    owners = shop["api"].get(f"/api/subscriptions/{sub['id']}/").json()
    assert set(OWNER_TUNING) <= set(owners)  # the owner's token sees them all
    what_the_receiver_gets = acme.patch(f"/api/subscriptions/{sub['id']}/", {
        "raw_message_delivery": True, "filter_policy_scope": "MessageBody", "filter_policy": {"a": {"b": ["c"]}}},
        format="json")  # the body's shape and a filter on it are the customer's own choices
    assert what_the_receiver_gets.status_code == 200, what_the_receiver_gets.content
    topic = acme.get(f"/api/topics/{shop['orders']['id']}/").json()
    assert topic["name"] == "orders" and not {"delivery_policy", "message_retention_days"} & set(topic)
    assert {"delivery_policy", "message_retention_days"} <= set(shop["api"].get(
        f"/api/topics/{shop['orders']['id']}/").json())


@pytest.mark.parametrize("confirm,said", [(True, "receives a confirmation request first"),
                                          (False, "Events start to arrive at once")])
def test_the_portal_promises_a_confirmation_only_where_one_is_asked(shop, link, client, settings, confirm, said):
    settings.HERALD_REQUIRE_CONFIRMATION = confirm
    assert said in client.get(f"{link}subscriptions/new/").content.decode()


def test_a_subscriptions_page_at_its_address_before_the_rename(shop, link, client):
    """A page opened before an upgrade (its forms, its live refresh) keeps working at the old `endpoints/` path."""
    sub = shop["acme"]["subscription"]["id"]
    now, before = client.get(f"{link}subscriptions/{sub}/"), client.get(f"{link}endpoints/{sub}/")
    assert now.status_code == before.status_code == 200
    assert f"subscriptions/{sub}/pause/" in before.content.decode()  # its forms post to the new addresses
    assert client.post(f"{link}endpoints/{sub}/pause/").status_code == 302


def test_a_pending_endpoint_shows_what_it_answered_to_the_last_confirmation_request(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    Subscription.objects.filter(id=sub).update(
        status="pending_confirmation", handshake_at=timezone.now(), handshake_status=200,
        handshake_answer='{"ok": true}', handshake_problem="the endpoint answered HTTP 200 without validationResponse")
    page = client.get(f"{link}subscriptions/{sub}/").content.decode()
    assert "Last confirmation request" in page
    assert "answered HTTP 200" in page and "without validationResponse" in page
    assert "{&quot;ok&quot;: true}" not in page  # the body is the admin's only: the URL may be anyone's


def test_the_add_form_says_how_an_endpoint_confirms(shop, link, client, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    page = client.get(f"{link}subscriptions/new/").content.decode()
    assert 'id="how-to-confirm"' in page and "validationResponse" in page and "confirm_url" in page
    settings.HERALD_REQUIRE_CONFIRMATION = False
    assert 'id="how-to-confirm"' not in client.get(f"{link}subscriptions/new/").content.decode()

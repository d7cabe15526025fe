"""The portal's pages (delivery/web/portal/pages.py): the tenant's endpoints, adding one, a subscription's page (at
its address before the rename too, with its transformation editor where the owner allows them, its event version
and the upgrade's preview when a newer one exists), a delivery's page and its retry; each shows the tenant's own rows
only and says what the last action did."""

import html

import pytest
from django.utils import timezone

from delivery.engine.accounts import tenancy
from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.models import Delivery
from subscriptions.models import EventType, Subscription, Tenant
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.delivery.web.portal.links import link as link_fixture
from tests.delivery.web.portal.links import path_of, portal_headers, words_shown

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared
link = link_fixture  # Acme's portal link


def test_the_home_page_lists_the_tenants_own_endpoints(shop, link, client):
    page = client.get(link)
    body = page.content.decode()
    assert page.status_code == 200 and "<h1>Your endpoints</h1>" in body
    assert "http://127.0.0.1:9/acme" in body
    assert "http://127.0.0.1:9/globex" not in body and "/own/" not in body  # another tenant's, the owner's own
    assert words_shown(page) == []


def test_adding_an_endpoint_shows_its_secret_once_and_a_second_time_is_refused(shop, link, client):
    added = client.post(f"{link}subscriptions/new/", {"url": "http://127.0.0.1:9/acme-two"})
    assert added.status_code == 200 and "<h1>Endpoint added</h1>" in added.content.decode()
    subscription = Subscription.objects.get(endpoint__url="http://127.0.0.1:9/acme-two")
    assert subscription.tenant.external_id == "acme" and subscription.topic_id == shop["orders"]["id"]
    assert f">{subscription.secret}</textarea>" in added.content.decode()
    again = client.post(f"{link}subscriptions/new/", {"url": "http://127.0.0.1:9/acme-two"})
    assert again.status_code == 400
    assert "This URL already receives these events: see it in your endpoints." in again.content.decode()
    assert Subscription.objects.filter(endpoint__url="http://127.0.0.1:9/acme-two").count() == 1


def test_adding_an_endpoint_without_a_url_says_what_is_missing(shop, link, client):
    page = client.post(f"{link}subscriptions/new/", {"url": "  "})
    assert page.status_code == 400 and "Enter your endpoint&#x27;s URL (https://…)." in page.content.decode()
    assert Subscription.objects.filter(tenant__external_id="acme").count() == 1


@pytest.mark.parametrize("confirm,said", [(True, "receives a confirmation request first"),
                                          (False, "Events start to arrive at once")])
def test_the_portal_promises_a_confirmation_only_where_one_is_asked(shop, link, client, settings, confirm, said):
    settings.HERALD_REQUIRE_CONFIRMATION = confirm
    assert said in client.get(f"{link}subscriptions/new/").content.decode()


def test_the_add_form_says_how_an_endpoint_confirms(shop, link, client, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    page = client.get(f"{link}subscriptions/new/").content.decode()
    assert 'id="how-to-confirm"' in page and "validationResponse" in page and "confirm_url" in page
    settings.HERALD_REQUIRE_CONFIRMATION = False
    assert 'id="how-to-confirm"' not in client.get(f"{link}subscriptions/new/").content.decode()


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


def acmes_delivery(shop) -> Delivery:
    published = shop["api"].post(f"/api/topics/{shop['orders']['id']}/publish/", {"payload": 1, "tenant": "acme"},
                                 format="json")
    assert published.status_code == 202, published.content
    return Delivery.objects.get(message_id=published.json()["message_id"], subscription__tenant__external_id="acme")


def test_retrying_a_delivery_says_so_on_its_page(shop, link, client):
    delivery = acmes_delivery(shop)
    retried = client.post(f"{link}deliveries/{delivery.id}/retry/")
    assert retried.status_code == 302
    assert retried["Location"] == f"{path_of(link)}deliveries/{delivery.id}/?done=retry"
    assert words_shown(client.get(retried["Location"])) == ["The delivery is being attempted again."]


def test_a_delivery_that_cannot_be_retried_is_refused_with_the_services_reason(shop, link, client):
    delivery = acmes_delivery(shop)
    Delivery.objects.filter(id=delivery.id).update(status="succeeded")
    refused = client.post(f"{link}deliveries/{delivery.id}/retry/")
    assert refused.status_code == 409
    assert '<p role="alert">A succeeded delivery cannot be retried.</p>' in refused.content.decode()
    portal_headers(refused)


def test_another_tenants_delivery_is_not_found(shop, link, client):
    published = shop["api"].post(f"/api/topics/{shop['orders']['id']}/publish/", {"payload": 1, "tenant": "globex"},
                                 format="json")
    theirs = Delivery.objects.get(message_id=published.json()["message_id"], subscription__tenant__external_id="globex")
    assert client.get(f"{link}deliveries/{theirs.id}/").status_code == 404
    assert client.post(f"{link}deliveries/{theirs.id}/retry/").status_code == 404
    assert Delivery.objects.get(id=theirs.id).attempt_count == 0


# What a tenant's key sees and sets through the API, beside the portal's pages: no owner tuning.
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


def test_the_transformation_editor_is_offered_only_where_the_owner_allows_transformations(shop, link, client, user):
    sub = shop["acme"]["subscription"]["id"]
    assert 'id="transformation-code"' not in client.get(f"{link}subscriptions/{sub}/").content.decode()
    EventType.objects.create(owner=user, name="order.created", example={"id": "ord_1", "total": "12.50"})
    Subscription.objects.filter(id=sub).update(event_types=["order.created"], transformation={
        "code": "function handler(webhook) { return webhook; }", "enabled": False})
    tenancy.portal_update(owner=user, allow_transformations=True)
    page = client.get(f"{link}subscriptions/{sub}/").content.decode()
    editor = page.split('<section id="transformation"')[1].split("</section>")[0]
    assert ">function handler(webhook) { return webhook; }</textarea>" in editor  # the saved code, switched off
    assert 'id="transformation-enabled" name="enabled">' in editor
    assert '{\n  "id": "ord_1",\n  "total": "12.50"\n}</textarea>' in editor.replace("&quot;", '"')  # its example
    assert 'name="event_type" value="order.created"' in editor
    read_only = tenancy.portal_link(Tenant.objects.get(external_id="acme"), read_only=True)
    assert 'id="transformation-code"' not in client.get(f"{read_only}subscriptions/{sub}/").content.decode()


TO_JANUARY = "function handler(webhook) {\n  webhook.payload = {name: webhook.payload.full_name};\n  return webhook;\n}"


def part(page: str, start: str) -> str:
    """The page's element that begins with `start`, up to its section's end, its entities read."""
    return html.unescape(page.split(start)[1].split("</section>")[0].split("</dd>")[0])


def test_a_subscriptions_page_shows_its_version_and_the_upgrade_side_by_side(shop, link, client, user):
    sub = shop["acme"]["subscription"]["id"]
    assert "Event version" not in client.get(f"{link}subscriptions/{sub}/").content.decode()  # no versions yet
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01")
    event_version_create(event_type=customer, name="2026-06-01", down_converter=TO_JANUARY)  # pins acme's
    shop["api"].post(f"/api/topics/{shop['orders']['id']}/publish/", {
        "payload": {"full_name": "Grace Hopper"}, "event_type": "customer.created", "broadcast": True}, format="json")
    page = client.get(f"{link}subscriptions/{sub}/").content.decode()
    assert " ".join(part(page, '<dd id="event-version">').split()) == (
        "<code>2026-01-01</code> <br><span class=\"muted\">Pinned to <code>2026-01-01</code>: newer versions reach "
        "you once you upgrade.</span>")
    upgrade = part(page, '<section id="upgrade"')
    assert "Upgrade to 2026-06-01</h2>" in upgrade and "Your latest event of <code>customer.created</code>" in upgrade
    assert 'Now: <code>2026-01-01</code></figcaption>' in upgrade
    assert '>{\n  "name": "Grace Hopper"\n}</pre>' in upgrade
    assert 'After upgrading: <code>2026-06-01</code></figcaption>' in upgrade
    assert '>{\n  "full_name": "Grace Hopper"\n}</pre>' in upgrade
    assert 'name="event_version" value="2026-06-01"' in upgrade and "<button" in upgrade

    polled = client.get(f"{link}subscriptions/{sub}/", HTTP_SEC_FETCH_DEST="empty").content.decode()
    assert "<pre" not in part(polled, '<section id="upgrade"')  # the page's refresh: only its live parts are used
    read_only = tenancy.portal_link(Tenant.objects.get(external_id="acme"), read_only=True)
    looking = part(client.get(f"{read_only}subscriptions/{sub}/").content.decode(), '<section id="upgrade"')
    assert '"full_name": "Grace Hopper"' in looking and "<button" not in looking  # seen, not changed
    Subscription.objects.filter(id=sub).update(event_version="2026-06-01")
    upgraded = client.get(f"{link}subscriptions/{sub}/").content.decode()
    assert '<section id="upgrade"' not in upgraded and "Pinned to <code>2026-06-01</code>" in upgraded


def test_an_upgrade_with_nothing_to_preview_or_a_failing_converter_says_so(shop, link, client, user):
    sub = shop["acme"]["subscription"]["id"]
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01")
    event_version_create(event_type=customer, name="2026-06-01", down_converter="function handler(w) {\n  x();\n}")
    upgrade = part(client.get(f"{link}subscriptions/{sub}/").content.decode(), '<section id="upgrade"')
    assert "No preview: nothing to preview: no event of a type with versions" in upgrade and "<button" in upgrade
    shop["api"].post(f"/api/topics/{shop['orders']['id']}/publish/", {
        "payload": {"full_name": "Ada"}, "event_type": "customer.created", "broadcast": True}, format="json")
    upgrade = part(client.get(f"{link}subscriptions/{sub}/").content.decode(), '<section id="upgrade"')
    assert "Line 2: down-converter of 2026-06-01: ReferenceError: x is not defined" in upgrade
    assert '>{\n  "full_name": "Ada"\n}</pre>' in upgrade

"""The tenant portal in a real browser (Debian's Chromium driven by Playwright) against a live server and a real
receiver, one test per task a tenant does there, driven through the accessible names a screen reader announces
(roles and labels) and, where it matters, with the keyboard alone. Screenshots go to test-artifacts/browser/
(those in docs/img/portal-*.png come from here)."""

import json
import re
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from playwright.sync_api import expect

from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.state import health
from delivery.events import publish
from delivery.models import Delivery
from delivery.tenants import portal_link, tenant_create
from subscriptions.models import EventType, Portal, Subscription
from tests.conftest import ROOT, settle
from tests.receiver import Reply
from tests.test_browser import browser_page as browser_page_fixture
from tests.test_browser import shot

pytestmark = pytest.mark.django_db(transaction=True)
browser_page = browser_page_fixture  # the operator tests' Chromium page, shared


def echoing(request):
    """A receiver that consents to the handshake (echoes its token) and answers 200 to everything else."""
    event = request.json()
    if isinstance(event, dict) and event.get("type") == "herald.subscription.confirmation":
        return Reply(body=json.dumps({"validationResponse": event["data"]["token"]}).encode())
    return Reply()


@pytest.fixture
def shop(user, redis_conn):
    """Alice's shop: an open topic, a closed one, a catalog of two event types, a branded portal, tenant Acme."""
    topic_create(owner=user, name="orders", open_to_tenants=True, description="Order events")
    topic_create(owner=user, name="internal")
    EventType.objects.create(owner=user, name="order.created", description="An order was placed",
                             example={"order": 17, "total": "12.50"})
    EventType.objects.create(owner=user, name="order.shipped", description="An order left the warehouse")
    Portal.objects.create(owner=user, name="Alice's Shop", colour="#7a2e8f")
    acme, _ = tenant_create(owner=user, external_id="acme", name="Acme Ltd")
    return {"owner": user, "acme": acme}


def open_portal(page, live_server, tenant, **options):
    """The link as the shop's backend gets it: a full URL from HERALD_PUBLIC_URL (here, the live server)."""
    with override_settings(HERALD_PUBLIC_URL=live_server.url):
        page.goto(portal_link(tenant, ttl=timedelta(minutes=30), **options))
    expect(page.get_by_role("heading", name="Your endpoints")).to_be_visible()


def test_add_an_endpoint_with_the_keyboard_and_confirm_it(live_server, browser_page, shop, receiver, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    receiver.script = echoing
    page = browser_page
    open_portal(page, live_server, shop["acme"])
    expect(page.get_by_role("banner")).to_contain_text("Alice's Shop")
    shot(page, "portal-01-empty")

    page.keyboard.press("Tab")  # the first stop is the skip link
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.get_by_role("navigation", name="Portal").get_by_role("link", name="Add endpoint").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Add an endpoint")).to_be_visible()
    page.get_by_label("Endpoint URL").fill(receiver.url)
    expect(page.get_by_label("Topic")).to_have_count(0)  # one topic is open: the customer chooses event types
    page.get_by_role("checkbox", name=re.compile("order.created")).check()
    page.get_by_role("button", name="Add endpoint").focus()
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="Endpoint added")).to_be_visible()
    shown = page.get_by_label("Signing secret")
    secret = shown.input_value()
    subscription = Subscription.objects.get(tenant=shop["acme"])
    assert subscription.event_types == ["order.created"] and str(subscription.secret) == secret
    assert secret.startswith("whsec_")
    assert shown.evaluate("e => e.scrollHeight <= e.clientHeight && e.scrollWidth <= e.clientWidth")  # unclipped
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.get_by_role("button", name="Copy the secret").click()
    expect(page.get_by_role("status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    shot(page, "portal-02-secret-shown-once")

    page.get_by_role("link", name="Go to the endpoint").click()
    expect(page.get_by_role("heading", name=re.compile("Endpoint"))).to_be_visible()
    expect(page.get_by_text("Topic", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    settle()  # the handshake goes out; the receiver consents, and the open page shows it without a reload
    expect(page.locator("dd.status-confirmed")).to_have_text("Receiving events")
    expect(page.get_by_role("button", name="Pause")).to_be_visible()  # its actions, too
    expect(page.get_by_role("button", name="Send the confirmation again")).to_have_count(0)
    assert secret not in page.content()  # shown once, never again


def test_a_wrong_field_is_named_and_announced(live_server, browser_page, shop):
    page = browser_page
    open_portal(page, live_server, shop["acme"])
    page.get_by_role("link", name="Add endpoint").first.click()
    page.get_by_label("Endpoint URL").fill("http://10.1.2.3/hook")  # a private address: refused
    page.get_by_role("checkbox", name=re.compile("order.created")).check()
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.get_by_role("alert").first).to_contain_text("correct the fields")
    expect(page.get_by_label("Endpoint URL")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#url-error")).to_be_visible()
    shot(page, "portal-03-field-error")
    assert not Subscription.objects.exists()


def test_deliveries_attempts_retry_replay_test_event_rotate_pause_resume(live_server, browser_page, shop, receiver):
    owner, acme = shop["owner"], shop["acme"]
    subscription, _ = subscription_create(topic=owner.topics.get(name="orders"), endpoint=receiver.url, tenant=acme,
                                          event_types=["order.created"],
                                          delivery_policy={"retryLimits": {"maxAttempts": 1}})
    receiver.script = [Reply(status=500, body=b'{"error": "database is down"}'), Reply()]
    publish("orders", {"order": 1}, owner=owner, event_type="order.created", tenant="acme")
    settle()
    page = browser_page
    open_portal(page, live_server, acme)
    page.get_by_role("link", name=receiver.url).click()
    deliveries = page.get_by_role("table", name="Latest deliveries")
    expect(deliveries).to_contain_text("Failed: no attempt succeeded before retries ran out")  # not "max_attempts"
    expect(deliveries).not_to_contain_text("Dead")
    shot(page, "portal-04-endpoint")

    deliveries.get_by_role("link").first.click()
    expect(page.get_by_role("heading", name=re.compile("Attempt 1"))).to_contain_text("HTTP 500")
    attempt = page.get_by_role("region", name=re.compile("Attempt 1"))
    attempt.get_by_text("Request headers").click()
    expect(attempt.locator("pre").first).to_contain_text(f"POST {receiver.url}")
    expect(attempt.locator("pre").first).to_contain_text("webhook-signature: v1,")
    attempt.get_by_text("Response body").click()
    expect(attempt.locator("pre").nth(3)).to_contain_text("database is down")
    shot(page, "portal-05-delivery-attempts")
    page.get_by_role("button", name="Retry now").click()
    expect(page.get_by_role("status")).to_contain_text("attempted again")
    attempt = page.get_by_role("region", name=re.compile("Attempt 1"))
    attempt.get_by_text("Response body").click()  # the reader opens a section while the page waits
    settle()
    assert Delivery.objects.get(subscription=subscription, replay=None).status == "succeeded"
    expect(page.locator("dd.status-succeeded")).to_have_text("Delivered")  # the open page updates by itself
    expect(page.get_by_role("button", name="Retry now")).to_have_count(0)
    expect(page.get_by_role("heading", name=re.compile("Attempt 2"))).to_contain_text("Delivered")
    expect(page.locator("#live-note")).to_have_text("Updated: Delivered")
    expect(page.get_by_role("region", name=re.compile("Attempt 1")).locator("details").nth(3)).to_have_attribute(
        "open", "")  # what the reader opened stays open
    shot(page, "portal-12-updated-after-retry")

    page.get_by_role("link", name=receiver.url).click()
    page.get_by_role("button", name="Send test event").click()
    expect(page.get_by_role("status")).to_contain_text("test event")
    page.get_by_label(re.compile("Send again every event")).fill("2")
    page.get_by_role("button", name="Replay").click()
    expect(page.get_by_role("status")).to_contain_text("Replay started")
    settle()
    types = [r.json()["type"] for r in receiver.requests]
    assert types.count("herald.test") == 1 and types.count("order.created") == 3  # failed, retried, replayed

    page.get_by_role("button", name="Rotate signing secret").click()
    expect(page.get_by_role("heading", name="New signing secret")).to_be_visible()
    assert page.get_by_label("Signing secret").input_value().startswith("whsec_")
    page.get_by_role("link", name="Go to the endpoint").click()
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("dd.status-paused")).to_have_text("Paused")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("dd.status-confirmed")).to_have_text("Receiving events")


def test_a_frozen_endpoint_says_why_and_is_enabled_once_fixed(live_server, browser_page, shop, receiver):
    owner, acme = shop["owner"], shop["acme"]
    subscription, _ = subscription_create(topic=owner.topics.get(name="orders"), endpoint=receiver.url, tenant=acme,
                                          event_types=["order.created"])
    health.endpoint_freeze(endpoint=subscription.endpoint)
    page = browser_page
    open_portal(page, live_server, acme)
    expect(page.get_by_role("alert")).to_contain_text("frozen")
    shot(page, "portal-06-frozen")
    page.get_by_role("alert").get_by_role("link", name=receiver.url).click()
    expect(page.get_by_text("Nothing is sent to a frozen endpoint")).to_be_visible()
    page.get_by_role("button", name="Enable endpoint").click()
    expect(page.get_by_role("status")).to_contain_text("Enabled")
    subscription.endpoint.refresh_from_db()
    assert subscription.endpoint.state == "active"


def test_the_catalog_and_a_read_only_link(live_server, browser_page, shop, receiver):
    owner, acme = shop["owner"], shop["acme"]
    subscription_create(topic=owner.topics.get(name="orders"), endpoint=receiver.url, tenant=acme,
                        event_types=["order.created"])
    page = browser_page
    open_portal(page, live_server, acme, read_only=True)
    expect(page.get_by_role("banner")).to_contain_text("read-only")
    expect(page.get_by_role("link", name="Add endpoint")).to_have_count(0)
    page.get_by_role("link", name="Event types").click()
    expect(page.get_by_role("heading", name="order.created")).to_be_visible()
    expect(page.locator("pre").first).to_contain_text('"total": "12.50"')
    shot(page, "portal-07-catalog")
    page.get_by_role("link", name="Endpoints").click()
    page.get_by_role("link", name=receiver.url).click()
    expect(page.get_by_role("button")).to_have_count(0)  # nothing to change through a read-only link


def test_choose_other_event_types_and_move_to_a_new_url(live_server, browser_page, shop, receiver, other_receiver,
                                                        settings):
    owner, acme = shop["owner"], shop["acme"]
    subscription, _ = subscription_create(topic=owner.topics.get(name="orders"), endpoint=receiver.url, tenant=acme,
                                          event_types=["order.created"])
    settings.HERALD_REQUIRE_CONFIRMATION = True
    other_receiver.script = echoing
    page = browser_page
    open_portal(page, live_server, acme)
    page.get_by_role("link", name=receiver.url).click()
    types = page.get_by_role("group", name="Event types to receive")
    types.get_by_role("checkbox", name=re.compile("order.created")).uncheck()
    types.get_by_role("checkbox", name=re.compile("order.shipped")).check()
    page.get_by_role("button", name="Save event types").click()
    expect(page.get_by_role("status")).to_contain_text("event types are saved")
    subscription.refresh_from_db()
    assert subscription.event_types == ["order.shipped"]

    page.get_by_label("Change the URL").fill(other_receiver.url)
    page.get_by_role("button", name="Change URL").click()
    expect(page.get_by_role("status")).to_contain_text("URL is changed")
    expect(page.locator("dd.status-pending_confirmation")).to_be_visible()
    shot(page, "portal-08-moved-awaiting-confirmation")
    settle()  # the new URL consents
    expect(page.locator("dd.status-confirmed")).to_have_text("Receiving events")
    publish("orders", {"order": 2}, owner=owner, event_type="order.shipped", tenant="acme")
    settle()
    assert [r.json()["type"] for r in other_receiver.requests][-1] == "order.shipped"
    assert receiver.requests == []


def test_removing_an_endpoint_asks_first(live_server, browser_page, shop, receiver):
    owner, acme = shop["owner"], shop["acme"]
    subscription, _ = subscription_create(topic=owner.topics.get(name="orders"), endpoint=receiver.url, tenant=acme,
                                          event_types=["order.created"])
    publish("orders", {"order": 1}, owner=owner, event_type="order.created", tenant="acme")
    settle()
    page = browser_page
    open_portal(page, live_server, acme)
    page.get_by_role("link", name=receiver.url).click()
    page.get_by_role("button", name="Remove endpoint…").click()
    expect(page.get_by_role("heading", name="Remove this endpoint?")).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text("delivery history (1 delivery) is deleted with it")
    shot(page, "portal-09-remove-asks-first")
    assert Subscription.objects.filter(id=subscription.id).exists()  # the first press removed nothing
    page.get_by_role("link", name="Keep it").click()
    expect(page.locator("dd.status-confirmed")).to_be_visible()
    page.get_by_role("button", name="Remove endpoint…").click()
    page.get_by_role("button", name="Yes, remove it").click()
    expect(page.get_by_role("status")).to_contain_text("Endpoint removed")
    assert not Subscription.objects.filter(id=subscription.id).exists()


def shop_page(html: str) -> Reply:
    """The shop's own app, served by a receiver on 127.0.0.1 (a real server: a redirect goes to it for real)."""
    return Reply(body=html.encode(), headers={"Content-Type": "text/html; charset=utf-8"})


def test_an_expired_link_leads_to_the_refresh_url_or_says_so_in_the_shops_colours(live_server, browser_page, shop,
                                                                                    other_receiver):
    page = browser_page
    with override_settings(HERALD_PUBLIC_URL=live_server.url):
        expired = portal_link(shop["acme"], ttl=timedelta(minutes=5), now=timezone.now() - timedelta(minutes=6))
    page.goto(expired)
    expect(page.get_by_role("heading", name="This link has expired")).to_be_visible()
    expect(page.get_by_role("banner")).to_contain_text("Alice's Shop")
    expect(page.get_by_role("alert")).to_contain_text("open the page again from the app that gave it to you")
    shot(page, "portal-10-expired")

    refresh = f"{other_receiver.url}/account/webhooks"
    Portal.objects.filter(owner=shop["owner"]).update(refresh_url=refresh)
    other_receiver.script = [shop_page("<title>Alice's Shop</title><h1>Your account</h1>")]
    page.goto(expired)  # a host the operator did not list: a link naming where it leads, which the tenant clicks
    expect(page.get_by_role("heading", name="This link has expired")).to_be_visible()
    expect(page.locator("strong", has_text="127.0.0.1")).to_be_visible()
    page.get_by_role("link", name=refresh).click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    assert page.url == refresh
    with override_settings(HERALD_PORTAL_REFRESH_HOSTS=["127.0.0.1"]):  # a host the operator allowed: straight there
        page.goto(expired)
        expect(page.get_by_role("heading", name="Your account")).to_be_visible()
        assert page.url == refresh


def framing_snippet() -> str:
    """docs/tenants.md's iframe and height listener, as a shop pastes it into its page."""
    text = (ROOT / "docs" / "tenants.md").read_text()
    return text.split("<!-- docs-test: run by tests/test_portal_browser.py")[1].split("```html")[1].split("```")[0]


def test_in_an_iframe_the_portal_tells_the_shops_page_its_height(live_server, browser_page, shop, receiver,
                                                                 other_receiver):
    owner, acme = shop["owner"], shop["acme"]
    for n in range(4):
        subscription_create(topic=owner.topics.get(name="orders"), endpoint=f"{receiver.url}{n}", tenant=acme,
                            event_types=["order.created"])
    shop_origin = other_receiver.url.split("/", 3)[:3]
    Portal.objects.filter(owner=owner).update(frame_ancestors=["/".join(shop_origin)])
    with override_settings(HERALD_PUBLIC_URL=live_server.url):
        link = portal_link(acme)
    other_receiver.script = [shop_page(
        f"<!doctype html><title>Alice's Shop</title><h1>Webhooks</h1>{framing_snippet()}".replace(
            "{{ portal_url }}", link))]
    page = browser_page
    page.goto(f"{other_receiver.url}/account/webhooks")
    portal = page.frame_locator("iframe")
    expect(portal.get_by_role("heading", name="Your endpoints")).to_be_visible()
    frame = page.locator("iframe")
    content = portal.locator("body").evaluate("body => Math.ceil(body.getBoundingClientRect().height)")
    expect(frame).to_have_attribute("style", re.compile(rf"height: {content}px"))
    assert content > 300  # taller than an iframe's default height: the shop's page grew to fit, no inner scrollbar
    shot(page, "portal-11-framed")


def test_write_test_and_save_a_transformation(live_server, browser_page, shop, receiver):
    owner, acme = shop["owner"], shop["acme"]
    subscription, _ = subscription_create(topic=owner.topics.get(name="orders"), endpoint=receiver.url, tenant=acme,
                                          event_types=["order.created"])
    page = browser_page
    open_portal(page, live_server, acme)
    page.get_by_role("link", name=receiver.url).click()
    expect(page.get_by_role("region", name="Transformation")).to_have_count(0)  # the owner has not allowed them
    Portal.objects.filter(owner=owner).update(allow_transformations=True)
    page.reload()
    editor = page.get_by_role("region", name="Transformation")
    payload = editor.get_by_label(re.compile("Payload to test with"))
    expect(payload).to_have_value(re.compile(r'"order": 17'))  # the catalog's example of order.created
    slack = "function handler(webhook) {\n  webhook.payload = {text: \"New order \" + webhook.payload.id};\n" \
            "  return webhook;\n}"
    editor.get_by_label("Code", exact=True).fill(slack)
    payload.fill('{"id": "ord_1042", "total": "12.50"}')
    editor.get_by_role("button", name="Test", exact=True).click()
    result = page.get_by_role("region", name="Test result")
    expect(result.get_by_label("Payload that would be sent")).to_contain_text('"text": "New order ord_1042"')
    expect(result).to_contain_text("POST")
    expect(page.get_by_label("Code", exact=True)).to_have_value(slack)  # what was typed stays
    shot(page, "portal-13-transformation-tested")
    assert receiver.requests == [] and Subscription.objects.get(id=subscription.id).transformation is None

    page.get_by_role("button", name="Save transformation").click()
    expect(page.get_by_role("status")).to_contain_text("The transformation is saved")
    assert Subscription.objects.get(id=subscription.id).transformation == {"code": slack, "enabled": True}
    expect(page.get_by_label("Code", exact=True)).to_have_value(slack)
    expect(page.get_by_label("Run it before each send")).to_be_checked()
    shot(page, "portal-14-transformation-saved")


def test_see_the_newer_event_version_side_by_side_and_upgrade(live_server, browser_page, shop, receiver):
    owner, acme = shop["owner"], shop["acme"]
    customer = event_type_create(owner=owner, name="customer.created", description="A customer signed up")
    event_version_create(event_type=customer, name="2026-01-01", example={"id": "C-7", "name": "Ada Lovelace"})
    subscription, _ = subscription_create(topic=owner.topics.get(name="orders"), endpoint=receiver.url, tenant=acme,
                                          event_types=["customer.created"])
    assert subscription.event_version == "2026-01-01"  # the latest when it was made
    event_version_create(event_type=customer, name="2026-06-01", example={"id": "C-7", "full_name": "Ada Lovelace"},
                         down_converter="function handler(webhook) {\n  const { full_name, ...rest } = webhook.payload;"
                                        "\n  webhook.payload = { ...rest, name: full_name };\n  return webhook;\n}")
    publish(owner.topics.get(name="orders"), {"id": "C-8", "full_name": "Grace Hopper"},
            event_type="customer.created", tenant=acme)
    page = browser_page
    open_portal(page, live_server, acme)
    page.get_by_role("link", name=receiver.url).click()
    expect(page.locator("#event-version")).to_contain_text("Pinned to 2026-01-01")
    upgrade = page.get_by_role("region", name="Upgrade to 2026-06-01")
    expect(upgrade).to_contain_text("Your latest event of customer.created")
    now = upgrade.get_by_label("Now: 2026-01-01")
    expect(now).to_contain_text('"name": "Grace Hopper"')
    expect(now).not_to_contain_text("full_name")
    expect(upgrade.get_by_label("After upgrading: 2026-06-01")).to_contain_text('"full_name": "Grace Hopper"')
    beside = [box["x"] for box in (upgrade.get_by_role("figure").nth(n).bounding_box() for n in range(2))]
    assert beside[0] < beside[1]  # side by side
    shot(page, "portal-15-event-version-preview")
    assert Subscription.objects.get(id=subscription.id).event_version == "2026-01-01"  # a preview changes nothing

    upgrade.get_by_role("button", name="Upgrade to 2026-06-01").click()
    expect(page.get_by_role("status")).to_contain_text("Upgraded: your events arrive in the newer version")
    expect(page.locator("#event-version")).to_contain_text("Pinned to 2026-06-01")
    expect(page.get_by_role("region", name=re.compile("Upgrade to"))).to_have_count(0)
    assert Subscription.objects.get(id=subscription.id).event_version == "2026-06-01"
    shot(page, "portal-16-event-version-upgraded")

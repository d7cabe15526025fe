"""The tenant portal in a real browser (Debian's Chromium driven by Playwright) against a live server and a real
receiver, one test per task a tenant does there, driven through the accessible names a screen reader announces
(roles and labels) and, where it matters, with the keyboard alone. Screenshots go to test-artifacts/browser/
(those in docs/img/portal-*.png come from here)."""

import json
import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from delivery.engine import health
from delivery.engine.subscribing import subscription_create, topic_create
from delivery.events import publish
from delivery.models import Delivery
from delivery.tenants import portal_link, tenant_create
from subscriptions.models import EventType, Portal, Subscription
from tests.conftest import settle
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
    page.goto(live_server.url + portal_link(tenant, ttl=timedelta(minutes=30), **options))
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
    page.get_by_label("Topic").select_option(label="orders — Order events")
    expect(page.get_by_label("Topic").locator("option")).to_have_count(2)  # "Choose…" and the open topic only
    page.get_by_role("checkbox", name=re.compile("order.created")).check()
    page.get_by_role("button", name="Add endpoint").focus()
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="Endpoint added")).to_be_visible()
    secret = page.get_by_label("Signing secret").input_value()
    assert secret.startswith("whsec_")
    shot(page, "portal-02-secret-shown-once")
    subscription = Subscription.objects.get(tenant=shop["acme"])
    assert subscription.event_types == ["order.created"] and str(subscription.secret) == secret

    settle()  # the handshake goes out; the receiver consents
    page.get_by_role("link", name="Go to the endpoint").click()
    expect(page.get_by_role("heading", name=re.compile("Endpoint"))).to_be_visible()
    expect(page.locator("dd.status-confirmed")).to_have_text("Confirmed")
    assert secret not in page.content()  # shown once, never again


def test_a_wrong_field_is_named_and_announced(live_server, browser_page, shop):
    page = browser_page
    open_portal(page, live_server, shop["acme"])
    page.get_by_role("link", name="Add endpoint").first.click()
    page.get_by_label("Endpoint URL").fill("http://10.1.2.3/hook")  # a private address: refused
    page.get_by_label("Topic").select_option(label="orders — Order events")
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
    expect(deliveries).to_contain_text("Dead Lettered (max_attempts)")
    shot(page, "portal-04-endpoint")

    deliveries.get_by_role("link").first.click()
    expect(page.get_by_role("heading", name=re.compile("Attempt 1"))).to_contain_text("HTTP 500")
    page.get_by_text("Response").first.click()
    expect(page.locator("pre").nth(1)).to_contain_text("database is down")
    shot(page, "portal-05-delivery-attempts")
    page.get_by_role("button", name="Retry now").click()
    expect(page.get_by_role("status")).to_contain_text("attempted again")
    settle()
    assert Delivery.objects.get(subscription=subscription, replay=None).status == "succeeded"

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
    expect(page.locator("dd.status-confirmed")).to_have_text("Confirmed")


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
    page.reload()
    expect(page.locator("dd.status-confirmed")).to_have_text("Confirmed")
    publish("orders", {"order": 2}, owner=owner, event_type="order.shipped", tenant="acme")
    settle()
    assert [r.json()["type"] for r in other_receiver.requests][-1] == "order.shipped"
    assert receiver.requests == []

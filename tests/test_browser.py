"""The operator's story in a real browser (Debian's Chromium driven by Playwright) against a live server, with real
workers, the real scheduler and a real receiver: log in, find a failed delivery from the dashboard, read its
attempts, unfreeze its endpoint, redrive the dead letters, and see them delivered. Screenshots go to
test-artifacts/browser/."""

import os
import re
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import expect, sync_playwright

from delivery.models import Delivery
from subscriptions.models import Endpoint
from tests.conftest import ROOT, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture
def browser_page(monkeypatch):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package (apt-get install chromium)")
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(20_000)
        yield page
        browser.close()
        # ORM calls made while Playwright's loop runs get their own connection; close it before the database goes.
        connections.close_all()


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_operator_finds_a_failure_unfreezes_and_redrives(live_server, browser_page, api, user, receiver,
                                                          processes):
    user.is_staff = user.is_superuser = True
    user.save()
    receiver.script = [Reply(status=410, body=b'{"error":"this hook is gone"}')]
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    policy = {"retrySchedule": {"delays": [1]}, "retryLimits": {"maxAttempts": 3, "maxAgeSeconds": 20}}
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                                    "delivery_policy": policy}, format="json").json()
    processes.worker()
    processes.cron()
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"order": 1}}, format="json")
    wait_until(lambda: Endpoint.objects.get(id=subscription["endpoint_id"]).state == "frozen")
    wait_until(lambda: Delivery.objects.filter(status="dead_lettered").count() == 1)

    page = browser_page
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice-123")
    page.click("input[type=submit]")
    expect(page.locator("#herald-dashboard-link")).to_be_visible()
    shot(page, "01-admin-home")

    page.click("#herald-dashboard-link")
    expect(page.locator("#dead-letters .herald-stat")).to_have_text("1")
    expect(page.locator("#endpoint-states")).to_contain_text("frozen 1")
    shot(page, "02-dashboard")

    page.locator("a.herald-failed-delivery").first.click()
    expect(page.locator("body")).to_contain_text(re.compile("permanent.failure", re.I))
    attempts = page.locator(".inline-related")
    expect(attempts).to_contain_text("410")
    shot(page, "03-failed-delivery-and-attempts")

    page.locator(".inline-related a.inlineviewlink").first.click()
    expect(page.locator("body")).to_contain_text("this hook is gone")
    expect(page.locator("body")).to_contain_text("webhook-signature")
    shot(page, "04-attempt-detail")

    page.goto(f"{live_server.url}/admin/herald_subscriptions/endpoint/{subscription['endpoint_id']}/change/")
    expect(page.locator("body")).to_contain_text("the endpoint answered 410 Gone")
    shot(page, "05-endpoint-frozen-history")
    receiver.script = [Reply(status=200)]
    page.goto(f"{live_server.url}/admin/herald_subscriptions/endpoint/?state__exact=frozen")
    page.check(f"input[name=_selected_action][value='{subscription['endpoint_id']}']")
    page.select_option("select[name=action]", "enable")
    page.click("button[name=index]")
    expect(page.locator(".messagelist")).to_contain_text("Enabled 1 endpoint(s).")
    assert Endpoint.objects.get(id=subscription["endpoint_id"]).state == "active"
    shot(page, "06-endpoint-enabled")

    page.goto(f"{live_server.url}/admin/herald_subscriptions/subscription/")
    page.check(f"input[name=_selected_action][value='{subscription['id']}']")
    page.select_option("select[name=action]", "redrive")
    page.click("button[name=index]")
    expect(page.locator(".messagelist")).to_contain_text("Redrove 1 dead letter(s).")
    shot(page, "07-redriven")

    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 1)
    delivered = [r for r in receiver.requests if r.json()["data"] == {"order": 1}]
    assert len(delivered) == 2  # the 410 attempt, then the redriven one

    page.goto(f"{live_server.url}/dashboard/")
    expect(page.locator("#dead-letters .herald-stat")).to_have_text("0")
    page.goto(f"{live_server.url}/admin/herald_delivery/delivery/?status__exact=succeeded")
    expect(page.locator("#result_list")).to_contain_text(re.compile("Succeeded", re.I))
    shot(page, "08-delivered")
    assert os.path.getsize(ARTIFACTS / "08-delivered.png") > 0

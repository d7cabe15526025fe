""""Why did endpoint X not get event Y?", asked in a real browser (Debian's Chromium, 1366 px wide) against a live
server with a real worker, scheduler and receiver. One topic with five subscriptions and one published event; for
each case the operator starts from the dashboard, types the message id, reads the answer on the message's page and,
where there is a fix, applies it: delivered (nothing to do), failing (retry now), filtered out (the rule that failed),
not confirmed (resend the confirmation request), frozen (enable the endpoint, redrive the dead letter).
Screenshots go to test-artifacts/browser/ (docs/img/ holds copies for docs/operators.md)."""

import json
import re

import pytest
from playwright.sync_api import expect

from delivery.models import Delivery
from subscriptions.models import Endpoint, Subscription
from tests.conftest import wait_until
from tests.receiver import Reply
from tests.test_browser import ARTIFACTS, browser_page  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)
WIDTH = 1366


class Shop:
    """The scenario's state: which receiver paths fail, and the ids the tests look up."""

    def __init__(self):
        self.failing = {"/hook/failing": 503, "/hook/gone": 410, "/hook/unconfirmed": 404}
        self.ids = {}

    def reply(self, request):
        body = request.json()
        if body.get("type") == "herald.subscription.confirmation" and request.path not in self.failing:
            return Reply(body=json.dumps({"validationResponse": body["data"]["token"]}).encode())
        status = self.failing.get(request.path, 200)
        return Reply(status=status, body=b'{"error": "gone for good"}' if status == 410 else b"{}")


@pytest.fixture
def shop(api, user, receiver, processes, settings):
    user.is_staff = user.is_superuser = True
    user.set_password("pw-operator-1")
    user.save()
    state = Shop()
    receiver.script = state.reply
    topic = api.post("/api/topics/", {"name": "shop"}, format="json").json()

    def subscribe(name, **extra):
        response = api.post("/api/subscriptions/", {"topic": "shop", "endpoint": f"{receiver.url}/{name}", **extra},
                            format="json")
        assert response.status_code == 201, response.content
        state.ids[name] = response.json()
        return response.json()

    subscribe("ok")
    subscribe("failing", delivery_policy={"retrySchedule": {"delays": [600]}, "retryLimits": {"maxAttempts": 3}})
    subscribe("eu", filter_policy={"region": ["eu"]})
    subscribe("gone", delivery_policy={"retrySchedule": {"delays": [1]}, "retryLimits": {"maxAttempts": 3}})
    settings.HERALD_REQUIRE_CONFIRMATION = True
    subscribe("unconfirmed")
    processes.worker()
    processes.cron()
    wait_until(lambda: receiver.requests)  # the confirmation request went out (and got a 404)
    published = api.post("/api/topics/shop/publish/", {"payload": {"order": 7}, "attributes": {"region": "us"}},
                         format="json").json()
    state.message_id = published["message_id"]
    ids = {name: sub["id"] for name, sub in state.ids.items()}
    wait_until(lambda: Delivery.objects.filter(subscription_id=ids["ok"], status="succeeded").exists())
    wait_until(lambda: Delivery.objects.filter(subscription_id=ids["failing"], attempt_count=1).exists())
    wait_until(lambda: Delivery.objects.filter(subscription_id=ids["gone"], status="dead_lettered").exists())
    wait_until(lambda: Endpoint.objects.get(id=state.ids["gone"]["endpoint_id"]).state == "frozen")
    state.topic = topic
    return state


def ask(page, live_server, shop, name):
    """From the dashboard to the message's row for subscription `name`: returns the row."""
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto(f"{live_server.url}/dashboard/")
    if page.locator("#id_username").count():  # the login page first
        page.fill("#id_username", "alice")
        page.fill("#id_password", "pw-operator-1")
        page.click("input[type=submit]")
    expect(page.locator("#why")).to_be_visible()
    page.fill("#herald-why input[name=q]", shop.message_id)
    page.click("#herald-why input[type=submit]")
    page.locator("#result_list a", has_text=shop.message_id).click()
    row = page.locator(f"tr.herald-fanout-row[data-subscription='{shop.ids[name]['id']}']")
    expect(row).to_be_visible()
    return row


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"why-{name}.png"), full_page=True)


def no_horizontal_scroll(page):
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1")


def test_delivered(live_server, browser_page, shop):  # noqa: F811
    page = browser_page
    row = ask(page, live_server, shop, "ok")
    expect(row.locator(".herald-reason")).to_have_text("delivered after 1 attempt(s)")
    expect(page.locator("#herald-fanout")).to_contain_text("filtered_out 1")
    no_horizontal_scroll(page)
    shot(page, "1-message-page")
    row.locator("a.herald-delivery-link").click()
    expect(page.locator(".inline-related")).to_contain_text("200")
    expect(page.locator("body")).to_contain_text(re.compile(r"\d\d:\d\d:\d\d"))  # times to the second
    shot(page, "2-delivered")


def test_failing_then_retried_now(live_server, browser_page, shop, receiver):  # noqa: F811
    page = browser_page
    row = ask(page, live_server, shop, "failing")
    expect(row.locator(".herald-reason")).to_contain_text(
        re.compile(r"1 attempt\(s\) failed; next attempt at .* UTC; last error: HTTP 503"))
    row.locator("a.herald-delivery-link").click()
    expect(page.locator("body")).to_contain_text("last error")
    no_horizontal_scroll(page)
    shot(page, "3-failing-delivery")
    del shop.failing["/hook/failing"]  # the endpoint is fixed; no need to wait ten minutes for the next try
    page.click("#herald-retry")
    expect(page.locator(".messagelist")).to_contain_text("will be attempted now")
    delivery = Delivery.objects.get(subscription_id=shop.ids["failing"]["id"])
    wait_until(lambda: Delivery.objects.get(id=delivery.id).status == "succeeded")
    page.reload()
    expect(page.locator("body")).to_contain_text("delivered after 2 attempt(s)")
    expect(page.locator(".inline-related")).to_contain_text(re.compile("manual", re.I))
    shot(page, "4-retried-now")


def test_filtered_out(live_server, browser_page, shop):  # noqa: F811
    page = browser_page
    row = ask(page, live_server, shop, "eu")
    expect(row).to_contain_text("filtered_out")
    expect(row.locator(".herald-reason")).to_have_text(
        """filtered out: attribute 'region' is "us", which meets none of ["eu"]""")
    row.scroll_into_view_if_needed()
    shot(page, "5-filtered-out")


def test_not_confirmed_then_confirmation_resent(live_server, browser_page, shop):  # noqa: F811
    page = browser_page
    row = ask(page, live_server, shop, "unconfirmed")
    expect(row.locator(".herald-reason")).to_contain_text("awaiting confirmation of its endpoint")
    expect(row.locator(".herald-fix")).to_contain_text("resend the confirmation request")
    shot(page, "6-not-confirmed")
    row.locator("a", has_text=f"#{shop.ids['unconfirmed']['id']}").click()
    del shop.failing["/hook/unconfirmed"]  # the endpoint now answers the handshake
    page.click("#herald-resend-confirmation")
    expect(page.locator(".messagelist")).to_contain_text("A new confirmation request is on its way")
    wait_until(lambda: Subscription.objects.get(id=shop.ids["unconfirmed"]["id"]).status == "confirmed")
    page.reload()
    expect(page.locator(".field-status")).to_contain_text(re.compile("confirmed", re.I))
    shot(page, "7-confirmed")


def test_frozen_then_enabled_and_redriven(live_server, browser_page, shop):  # noqa: F811
    page = browser_page
    row = ask(page, live_server, shop, "gone")
    expect(row).to_contain_text("endpoint frozen")
    expect(row.locator(".herald-reason")).to_contain_text(re.compile(r"dead-lettered \(.*\).*last error: HTTP 410"))
    expect(row.locator(".herald-fix")).to_contain_text("enable the endpoint (its page), then redrive")
    shot(page, "8-frozen")
    row.locator("a.herald-endpoint-link").click()
    expect(page.locator("body")).to_contain_text("the endpoint answered 410 Gone")
    expect(page.locator("#herald-recent-attempts")).to_contain_text("410")
    assert page.locator("input[name=_save]").count() == 0
    no_horizontal_scroll(page)
    del shop.failing["/hook/gone"]
    page.click("#herald-enable")
    expect(page.locator(".messagelist")).to_contain_text("Enabled")
    page.locator("#subscriptions-group a.inlinechangelink").first.click()  # its subscription
    page.click("#herald-redrive")
    expect(page.locator(".messagelist")).to_contain_text("Redrove 1 dead letter(s).")
    wait_until(lambda: Delivery.objects.get(subscription_id=shop.ids["gone"]["id"]).status == "succeeded")
    ask(page, live_server, shop, "gone")
    row = page.locator(f"tr.herald-fanout-row[data-subscription='{shop.ids['gone']['id']}']")
    expect(row.locator(".herald-reason")).to_have_text("delivered after 2 attempt(s)")
    shot(page, "9-redriven")


def test_lists_fit_an_operator_screen(live_server, browser_page, shop):  # noqa: F811
    """The status and outcome columns are visible at 1280 px without scrolling sideways."""
    page = browser_page
    ask(page, live_server, shop, "ok")
    page.set_viewport_size({"width": 1280, "height": 900})
    for path, column in (("/admin/herald_delivery/delivery/", "column-status_badge"),
                         ("/admin/herald_delivery/attempt/", "column-outcome"), ("/dashboard/", None)):
        page.goto(live_server.url + path)
        no_horizontal_scroll(page)
        if column:
            box = page.locator(f"th.{column}").bounding_box()
            assert box is not None and box["x"] + box["width"] <= 1280, (path, box)
    shot(page, "0-dashboard")


def test_api_docs_render_with_the_network_off(live_server, browser_page):  # noqa: F811
    """Swagger UI and ReDoc come from Herald's static files: with every request off 127.0.0.1 refused, both render
    the API's operations, and neither asks another host for anything (ReDoc's footer logo included)."""
    page = browser_page
    refused = []

    def only_local(route):
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .opblock-summary-path").first).to_be_visible()
    expect(page.locator(".swagger-ui")).to_contain_text("/api/topics/{id}/publish/")
    page.screenshot(path=str(ARTIFACTS / "api-docs-offline.png"))
    assert refused == []
    page.goto(f"{live_server.url}/api/redoc/")
    expect(page.locator("body")).to_contain_text("Herald API")
    expect(page.locator("body")).to_contain_text("/api/messages/{id}/fanout/")
    assert refused == []

"""The actions on a subscription's page (delivery/web/portal/actions.py): the one table of them, each action's
service and words through a real request against the real database, and the service's refusals shown on the
subscription's page with the API's reasons; the transformation editor's test-run and save where the owner allows
transformations, refused where it does not; the upgrade to a newer event version."""

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.accounts import tenancy
from delivery.engine.accounts.confirmation import current_token, token_hash
from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.engine.accounts.tenancy import NOT_ALLOWED
from delivery.engine.state import health
from delivery.models import Delivery, Replay
from delivery.web.api import throttling
from delivery.web.portal.actions import ACTIONS, Action, done_words
from subscriptions.models import Endpoint, EventType, Subscription
from tests.conftest import ROOT
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.delivery.web.portal.links import link as link_fixture
from tests.delivery.web.portal.links import path_of, portal_headers, words_shown

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared
link = link_fixture  # Acme's portal link

BUTTON = re.compile(r"url 'herald:portal-subscription-action' token subscription\.id '(\w+)'")
HELD = "The URL is changed. Until the new endpoint confirms, events are held for it (none are lost)."


def test_the_table_says_what_each_action_did(settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    assert {name: done_words(name) for name in ACTIONS} == {
        "pause": "Paused: new events are held until you resume.", "resume": "Resumed.",
        "rotate": None,  # it shows the new secret on a page of its own
        "test": "A test event is on its way.", "delete": "Endpoint removed.", "replay": "Replay started.",
        "enable": "Enabled: held deliveries go out now.", "resend": "A new confirmation request is on its way.",
        "move": HELD, "types": "The event types are saved.", "transformation": "The transformation is saved.",
        "transformation_test": None,  # its result is shown in the editor
        "version": "Upgraded: your events arrive in the newer version from now on."}
    assert done_words("retry") is None and done_words("") is None  # a delivery's, and none


def test_every_action_has_its_button_and_every_button_its_action():
    templates = ROOT / "delivery" / "templates" / "herald" / "portal"
    pressed = {name for path in templates.glob("*.html") for name in BUTTON.findall(path.read_text())}
    assert pressed == set(ACTIONS)  # remove.html's button too
    on_its_page = set(BUTTON.findall((templates / "subscription.html").read_text()))
    assert on_its_page == set(ACTIONS)


def test_an_action_that_would_say_nothing_cannot_be_made():
    def run(subscription, request):
        return None

    with pytest.raises(ValueError, match="says what it did"):
        Action(run)
    with pytest.raises(ValueError, match="says what it did"):
        Action(run, done="Done.", shows=lambda result: ("secret.html", {}))
    with pytest.raises(ValueError, match="says what it did"):
        Action(run, done="Done.", on_page=True)
    assert Action(run, done="Done.").words() == "Done."


def press(client, link, sub: int, name: str, body=None, *, home: bool = False):
    """Press an action's button; it sends the tenant back to the subscription's page (the home page with `home`),
    where its words are shown: the notices on that page."""
    pressed = client.post(f"{link}subscriptions/{sub}/{name}/", body or {})
    assert pressed.status_code == 302, pressed.content
    back = "" if home else f"subscriptions/{sub}/"
    assert pressed["Location"] == f"{path_of(link)}{back}?done={name}"
    return words_shown(client.get(pressed["Location"]))


def test_pause_and_resume(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    assert press(client, link, sub, "pause") == ["Paused: new events are held until you resume."]
    assert Subscription.objects.get(id=sub).status == "paused"
    assert press(client, link, sub, "resume") == ["Resumed."]
    assert Subscription.objects.get(id=sub).status == "confirmed"


def test_a_test_event(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    assert press(client, link, sub, "test") == ["A test event is on its way."]
    assert list(Delivery.objects.filter(subscription_id=sub).values_list("message__event_type", flat=True)) == [
        "herald.test"]


def test_rotating_the_secret_shows_the_new_one_once(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    before = Subscription.objects.get(id=sub).secret
    page = client.post(f"{link}subscriptions/{sub}/rotate/")
    rotated = Subscription.objects.get(id=sub)
    assert page.status_code == 200 and "<h1>New signing secret</h1>" in page.content.decode()
    assert f">{rotated.secret}</textarea>" in page.content.decode()
    assert rotated.secret != before and rotated.previous_secret == before
    assert words_shown(page) == []


def test_removing_an_endpoint_takes_a_second_step(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    asked = client.post(f"{link}subscriptions/{sub}/delete/")
    assert asked.status_code == 200 and "Remove this endpoint?" in asked.content.decode()
    assert Subscription.objects.filter(id=sub).exists()
    assert press(client, link, sub, "delete", {"confirm": "yes"}, home=True) == ["Endpoint removed."]
    assert not Subscription.objects.filter(id=sub).exists()


def test_a_replay_from_the_hours_asked(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    before = timezone.now()
    assert press(client, link, sub, "replay", {"hours": "2"}) == ["Replay started."]
    after = timezone.now()
    since = Replay.objects.get(subscription_id=sub).since
    assert before - timedelta(hours=2) <= since <= after - timedelta(hours=2)


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
    assert Replay.objects.filter(subscription_id=sub).count() == (1 if accepted else 0)


def test_enabling_a_disabled_endpoint(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    health.endpoint_disable(endpoint=Subscription.objects.get(id=sub).endpoint)
    assert press(client, link, sub, "enable") == ["Enabled: held deliveries go out now."]
    assert Endpoint.objects.get(subscriptions__id=sub).state == "active"


def test_sending_the_confirmation_again(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    Subscription.objects.filter(id=sub).update(status="pending_confirmation")
    assert press(client, link, sub, "resend") == ["A new confirmation request is on its way."]
    pending = Subscription.objects.get(id=sub)
    assert pending.confirmation_token_hash == token_hash(current_token(pending))


@pytest.mark.parametrize("confirm,words,status", [
    (False, "The URL is changed: events go there from now on.", "confirmed"),
    (True, HELD, "pending_confirmation")])
def test_moving_to_another_url(shop, link, client, settings, confirm, words, status):
    settings.HERALD_REQUIRE_CONFIRMATION = confirm
    sub = shop["acme"]["subscription"]["id"]
    assert press(client, link, sub, "move", {"url": " http://127.0.0.1:9/acme-new "}) == [words]
    moved = Subscription.objects.get(id=sub)
    assert (moved.endpoint.url, moved.status) == ("http://127.0.0.1:9/acme-new", status)


def test_changing_the_url_refuses_a_long_one_with_the_apis_reason(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    long_url = "http://127.0.0.1:9/" + "a" * 2100
    api = shop["acme"]["client"].patch(f"/api/subscriptions/{sub}/", {"endpoint": long_url}, format="json")
    assert api.status_code == 400
    reason = api.json()["endpoint"][0]
    page = client.post(f"{link}subscriptions/{sub}/move/", {"url": long_url})
    assert page.status_code == 400 and reason in page.content.decode()
    assert Subscription.objects.get(id=sub).endpoint.url == "http://127.0.0.1:9/acme"


def test_choosing_event_types(shop, link, client, user):
    EventType.objects.create(owner=user, name="order.created", open_to_tenants=True)
    EventType.objects.create(owner=user, name="order.shipped", open_to_tenants=True)
    sub = shop["acme"]["subscription"]["id"]
    assert press(client, link, sub, "types", {"event_types": ["order.shipped"]}) == ["The event types are saved."]
    assert Subscription.objects.get(id=sub).event_types == ["order.shipped"]


def test_a_refused_action_is_shown_on_the_subscriptions_page_with_the_services_status(shop, link, client):
    sub = shop["acme"]["subscription"]["id"]
    Subscription.objects.filter(id=sub).update(status="pending_confirmation")  # its page waits on a confirmation
    assert "<body data-refresh>" in client.get(f"{link}subscriptions/{sub}/").content.decode()
    refused = client.post(f"{link}subscriptions/{sub}/pause/")
    body = refused.content.decode()
    assert refused.status_code == 409
    assert "Only a confirmed subscription can be paused; this one is pending_confirmation." in body
    assert "<body>" in body  # no refresh: the refusal is answered at the action's URL, which only POSTs
    assert words_shown(refused) == []
    portal_headers(refused)


def test_a_name_that_is_no_action_and_another_tenants_subscription_are_not_found(shop, link, client):
    acme, globex = shop["acme"]["subscription"]["id"], shop["globex"]["subscription"]["id"]
    for path in (f"subscriptions/{acme}/retry/", f"subscriptions/{acme}/words/", f"subscriptions/{globex}/pause/"):
        missing = client.post(link + path)
        assert missing.status_code == 404 and "There is no such page here." in missing.content.decode(), path
        portal_headers(missing)
    assert Subscription.objects.get(id=globex).status == "confirmed"


def test_upgrading_to_the_version_the_panel_offered(shop, link, client, user):
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01")
    event_version_create(event_type=customer, name="2026-06-01", down_converter="function handler(w) { return w; }")
    sub = shop["acme"]["subscription"]["id"]
    assert Subscription.objects.get(id=sub).event_version == "2026-01-01"  # pinned when June came
    event_version_create(event_type=customer, name="2026-11-01", down_converter="function handler(w) { return w; }")
    done = press(client, link, sub, "version", {"event_version": "2026-06-01"})  # the one it saw, not November
    assert done == ["Upgraded: your events arrive in the newer version from now on."]
    assert Subscription.objects.get(id=sub).event_version == "2026-06-01"
    assert press(client, link, sub, "version") == [done[0]]  # none named: the newest
    assert Subscription.objects.get(id=sub).event_version == "2026-11-01"
    refused = client.post(f"{link}subscriptions/{sub}/version/", {"event_version": "2030-01-01"})
    assert refused.status_code == 400
    assert "&#x27;2030-01-01&#x27; is not a version of any event type of the catalog" in refused.content.decode()
    assert Subscription.objects.get(id=sub).event_version == "2026-11-01"


def test_without_versions_there_is_nothing_to_upgrade_to(shop, link, client):
    refused = client.post(f"{link}subscriptions/{shop['acme']['subscription']['id']}/version/")
    assert refused.status_code == 400 and "No event type you receive has versions." in refused.content.decode()


SLACK = ("function handler(webhook) {\n  webhook.payload = {text: 'New order ' + webhook.payload.id};\n"
         "  return webhook;\n}")


@pytest.fixture
def editor(shop, user):
    """Acme's subscription to order.created (its catalog example: order ord_1), the owner allowing transformations."""
    EventType.objects.create(owner=user, name="order.created", example={"id": "ord_1"})
    Subscription.objects.filter(id=shop["acme"]["subscription"]["id"]).update(event_types=["order.created"])
    tenancy.portal_update(owner=user, allow_transformations=True)
    return shop["acme"]["subscription"]["id"]


def result_of(page) -> str:
    """The test-run's result, as the editor shows it."""
    body = page.content.decode()
    assert page.status_code == 200 and "<body>" in body, page.status_code  # answered at the action's URL: no refresh
    return html.unescape(body.split('<section id="transformation-result"')[1].split("</section>")[0])


def test_a_test_run_shows_what_would_be_sent_and_keeps_the_editor_as_it_was(editor, link, client):
    page = client.post(f"{link}subscriptions/{editor}/transformation_test/",
                       {"code": SLACK, "payload": '{"id": "ord_7"}', "event_type": "order.created"})
    shown = result_of(page)
    assert '<dd id="transformation-method">POST</dd>' in shown and ">No</dd>" in shown
    assert '"text": "New order ord_7"' in shown
    assert f">{SLACK}</textarea>".replace("'", "&#x27;") in page.content.decode()  # what was typed stays
    assert Subscription.objects.get(id=editor).transformation is None and not Delivery.objects.exists()
    example = client.post(f"{link}subscriptions/{editor}/transformation_test/", {"code": SLACK, "payload": " "})
    assert '"text": "New order ord_1"' in result_of(example)  # no payload: the catalog's example of the type
    cancel = "function handler(webhook) {\n  webhook.cancel = true;\n  return webhook;\n}"
    cancelled = client.post(f"{link}subscriptions/{editor}/transformation_test/", {"code": cancel, "payload": "{}"})
    assert ">Yes: nothing would be sent</dd>" in result_of(cancelled)


def test_a_failing_handler_shows_its_line_and_bad_input_is_refused_with_the_reason(editor, link, client):
    failing = "function handler(webhook) {\n  return webhook.payload.customer.name;\n}"
    page = client.post(f"{link}subscriptions/{editor}/transformation_test/", {"code": failing, "payload": "{}"})
    assert "Line 2: TypeError: Cannot read properties of undefined (reading 'name')" in result_of(page)
    refused = client.post(f"{link}subscriptions/{editor}/transformation_test/", {"code": SLACK, "payload": "{oops"})
    assert refused.status_code == 400
    assert 'id="transformation-error">The payload to test with is not JSON (JSONDecodeError).</p>' in (
        refused.content.decode())
    assert ">{oops</textarea>" in refused.content.decode()


def test_a_tenants_test_runs_are_counted_as_its_api_test_runs_are(editor, link, client, monkeypatch, redis_conn):
    monkeypatch.setattr(throttling.TransformationTestThrottle, "rate", "1/min")
    first = client.post(f"{link}subscriptions/{editor}/transformation_test/", {"code": SLACK, "payload": "{}"})
    assert first.status_code == 200
    second = client.post(f"{link}subscriptions/{editor}/transformation_test/", {"code": SLACK, "payload": "{}"})
    assert second.status_code == 429 and "Too many test-runs" in second.content.decode()


def test_saving_compiles_the_code_and_a_refusal_keeps_what_was_typed(editor, link, client):
    unfinished = "function handler(webhook) {\n  return webhook +\n}"
    refused = client.post(f"{link}subscriptions/{editor}/transformation/", {"code": unfinished, "enabled": "on"})
    body = html.unescape(refused.content.decode())
    assert refused.status_code == 400
    assert 'id="transformation-error">line 3: SyntaxError: Unexpected token \'}\'</p>' in body
    assert f">{unfinished}</textarea>" in body
    assert Subscription.objects.get(id=editor).transformation is None
    assert press(client, link, editor, "transformation", {"code": SLACK, "enabled": "on"}) == [
        "The transformation is saved."]
    assert Subscription.objects.get(id=editor).transformation == {"code": SLACK, "enabled": True}
    assert press(client, link, editor, "transformation", {"code": SLACK}) == ["The transformation is saved."]
    assert Subscription.objects.get(id=editor).transformation == {"code": SLACK, "enabled": False}
    assert press(client, link, editor, "transformation", {"code": ""}) == ["The transformation is saved."]
    assert Subscription.objects.get(id=editor).transformation is None


def test_where_the_owner_does_not_allow_transformations_both_are_refused(editor, link, client, user):
    tenancy.portal_update(owner=user, allow_transformations=False)
    for name in ("transformation", "transformation_test"):
        refused = client.post(f"{link}subscriptions/{editor}/{name}/", {"code": SLACK, "payload": "{}"})
        assert refused.status_code == 403 and NOT_ALLOWED.replace("'", "&#x27;") in refused.content.decode()
        assert 'id="transformation-code"' not in refused.content.decode()  # no editor on the page either
        portal_headers(refused)
    assert Subscription.objects.get(id=editor).transformation is None

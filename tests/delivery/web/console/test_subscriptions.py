"""The subscriptions' page (console/subscriptions.py): the effective policy with where each section comes from,
edits (a transformation's and the event version's too) checked and written by the service the API calls, secrets
never shown, and the redrive, pause, resume, resend-confirmation and replay buttons and actions."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.accounts import recovery
from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.models import Delivery, Replay
from delivery.receiver import generate_secret
from subscriptions.models import Subscription
from tests.conftest import drain, publish, settle
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import buttons, form_errors, words
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)

SUBSCRIPTIONS = "/admin/herald_subscriptions/subscription/"


def admin_form(admin_client, subscription_id: int) -> tuple[str, dict]:
    """The subscription's change page and the values its form would post back unchanged."""
    page = f"{SUBSCRIPTIONS}{subscription_id}/change/"
    stored = Subscription.objects.get(id=subscription_id)
    data = {"delivery_policy": "", "filter_policy": "", "filter_policy_scope": stored.filter_policy_scope,
            "event_types": "[]", "max_events_per_batch": stored.max_events_per_batch,
            "preferred_batch_size_kb": stored.preferred_batch_size_kb, "event_version": stored.event_version}
    if stored.ordered_delivery:
        data["ordered_delivery"] = "on"
    if stored.raw_message_delivery:
        data["raw_message_delivery"] = "on"
    if stored.transformation:  # its code, and its checkbox ticked when it runs
        data["transformation_0"] = stored.transformation["code"]
        if stored.transformation["enabled"]:
            data["transformation_1"] = "on"
    return page, data


def test_subscriptions_are_made_through_the_api_not_here(admin_client):
    assert admin_client.get(SUBSCRIPTIONS + "add/").status_code == 403


def test_subscription_page_shows_the_effective_policy_and_where_it_comes_from(admin_client, api, receiver,
                                                                              traffic):
    topic, own = traffic
    page = admin_client.get(f"{SUBSCRIPTIONS}{own['id']}/change/").content.decode()
    # section by section: its own retry schedule and limits, the topic's event-grid jitter and permanent codes
    assert ("retryLimits, retrySchedule from the subscription&#x27;s own delivery policy; jitter, responsePolicy from "
            "the delivery policy of topic &#x27;console&#x27;." in page)

    inherits = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/2"},
                        format="json").json()
    page = admin_client.get(f"{SUBSCRIPTIONS}{inherits['id']}/change/").content.decode()
    assert ("jitter, responsePolicy, retryLimits, retrySchedule from the delivery policy of topic &#x27;console&#x27;; "
            "healthyRetryPolicy from Herald&#x27;s default" not in page)  # the topic's preset is a whole retry policy
    assert ("jitter, responsePolicy, retryLimits, retrySchedule from the delivery policy of topic &#x27;console&#x27;."
            in page)
    assert "null" not in page.split('id="herald-policy-source"')[1].split("</pre>")[0]
    # The topic's event-grid preset: 30 attempts at most, but its 24-hour time-to-live ends it after 11.
    assert ("ends after attempt 11 (of at most 30): attempt 12 would come after the time-to-live of 86400 s"
            in page)

    bare = api.post("/api/topics/", {"name": "bare"}, format="json").json()
    plain = api.post("/api/subscriptions/", {"topic": bare["id"], "endpoint": receiver.url + "/3"},
                     format="json").json()
    page = admin_client.get(f"{SUBSCRIPTIONS}{plain['id']}/change/").content.decode()
    assert "jitter, retryLimits, retrySchedule from Herald&#x27;s default, HERALD_DEFAULT_DELIVERY_POLICY" in page


def test_subscription_buttons_redrive_pause_and_resend_confirmation(admin_client, api, receiver, traffic,
                                                                     settings):
    topic, subscription = traffic
    url = f"{SUBSCRIPTIONS}{subscription['id']}/"
    assert buttons(admin_client.get(url + "change/").content.decode()) == ["redrive", "pause"]
    receiver.script = [Reply(status=200)]
    response = admin_client.post(url + "do/redrive/", follow=True)
    assert "Redrove 1 dead letter(s)." in response.content.decode()
    settle()
    assert not Delivery.objects.filter(status="dead_lettered").exists()
    admin_client.post(url + "do/pause/")
    assert Subscription.objects.get(id=subscription["id"]).status == "paused"
    assert buttons(admin_client.get(url + "change/").content.decode()) == ["resume"]

    settings.HERALD_REQUIRE_CONFIRMATION = True
    receiver.script = [Reply(status=404)]  # the endpoint does not answer the handshake yet
    pending = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/new"},
                       format="json").json()
    drain()
    page_url = f"{SUBSCRIPTIONS}{pending['id']}/"
    assert buttons(admin_client.get(page_url + "change/").content.decode()) == ["resend-confirmation"]
    receiver.script = lambda request: Reply(body=b'{"validationResponse": "%s"}' % request.json()["data"][
        "token"].encode())
    response = admin_client.post(page_url + "do/resend-confirmation/", follow=True)
    assert "A new confirmation request is on its way" in response.content.decode()
    drain()
    assert Subscription.objects.get(id=pending["id"]).status == "confirmed"


def test_the_replay_action_asks_for_a_window_then_replays(admin_client, traffic, receiver, run_worker):
    _, subscription = traffic
    form = admin_client.post(SUBSCRIPTIONS, {"action": "replay", "_selected_action": [subscription["id"]]})
    assert form.status_code == 200 and 'name="since"' in form.content.decode()
    since = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    before = len(receiver.requests)
    response = admin_client.post(SUBSCRIPTIONS, {"action": "replay", "_selected_action": [subscription["id"]],
                                                 "apply": "1", "since": since}, follow=True)
    assert f"Subscription {subscription['id']}: replay " in response.content.decode()
    assert Replay.objects.get().messages == 2 and Replay.objects.get().requested_by.is_superuser
    settle()
    replayed = receiver.requests[before:]
    assert len(replayed) >= 2 and all(r.headers["herald-replay"] == str(Replay.objects.get().id) for r in replayed)
    bad = admin_client.post(SUBSCRIPTIONS, {"action": "replay", "_selected_action": [subscription["id"]],
                                            "apply": "1", "since": "not a time"})
    assert bad.status_code == 200 and "Enter a valid date/time" in bad.content.decode()


def test_turning_ordering_off_in_the_admin_releases_what_waits(admin_client, api, receiver):
    receiver.script = [Reply(status=503)]
    topic = api.post("/api/topics/", {"name": "ledger"}, format="json").json()
    subscription = api.post("/api/subscriptions/", {
        "topic": topic["id"], "endpoint": receiver.url + "/ordered", "ordered_delivery": True,
        "delivery_policy": {"retrySchedule": {"delays": [3600]}}}, format="json").json()
    for n in range(3):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"n": n}, "ordering_key": "k"}, format="json")
    assert Delivery.objects.filter(status="waiting").count() == 2
    page, data = admin_form(admin_client, subscription["id"])
    del data["ordered_delivery"]
    response = admin_client.post(page, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Subscription.objects.get(id=subscription["id"]).ordered_delivery is False
    assert Delivery.objects.filter(status="waiting").count() == 0
    assert Delivery.objects.filter(status="pending", next_attempt_at__isnull=False).count() == 3


def test_the_admin_refuses_what_the_api_refuses(admin_client, api, receiver):
    topic = api.post("/api/topics/", {"name": "shapes"}, format="json").json()
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url},
                            format="json").json()
    page, data = admin_form(admin_client, subscription["id"])
    response = admin_client.post(page, {**data, "raw_message_delivery": "on", "max_events_per_batch": 5})
    assert response.status_code == 200
    assert "cannot be combined with raw_message_delivery" in response.content.decode()
    stored = Subscription.objects.get(id=subscription["id"])
    assert (stored.raw_message_delivery, stored.max_events_per_batch) == (False, 1)


def test_the_admin_rotates_to_a_secret_of_your_own(admin_client, api, receiver):
    topic = api.post("/api/topics/", {"name": "keys"}, format="json").json()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url},
                       format="json").json()
    page, data = admin_form(admin_client, created["id"])
    refused = admin_client.post(page, {**data, "new_secret": "whsec_tooshort"})
    assert refused.status_code == 200 and "herald_secret" in refused.content.decode()
    assert Subscription.objects.get(id=created["id"]).secret == created["secret"]
    mine = generate_secret()
    assert admin_client.post(page, {**data, "new_secret": mine}).status_code == 302
    stored = Subscription.objects.get(id=created["id"])
    assert (stored.secret, stored.previous_secret) == (mine, created["secret"])
    assert mine not in admin_client.get(page).content.decode()  # never shown again


def test_the_list_links_each_subscriptions_dead_letters(admin_client, api):
    topic = create_topic(api)
    failing = create_subscription(api, topic["id"], "http://127.0.0.1:9/failing")
    create_subscription(api, topic["id"], "http://127.0.0.1:9/fine")
    for n in range(2):
        publish(api, topic, n)
    for delivery in Delivery.objects.filter(subscription_id=failing["id"]):
        recovery.delivery_dead_letter(delivery=delivery)
    page = admin_client.get(SUBSCRIPTIONS).content.decode()
    assert (f'<td class="field-dead_letters"><a href="/admin/herald_delivery/delivery/?subscription__id__exact='
            f'{failing["id"]}&status__exact=dead_lettered">2</a></td>') in page
    assert '<td class="field-dead_letters">0</td>' in page


def test_the_page_shows_delivery_headers_but_never_a_secret_value(admin_client, api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"], delivery_headers=[
        {"name": "X-Shop", "value": "alice"}, {"name": "X-Key", "value": "s3cret-value", "secret": True},
        {"name": "X-Region", "from_attribute": "region"}])
    plain = create_subscription(api, topic["id"], "http://127.0.0.1:9/plain")
    page = admin_client.get(f"{SUBSCRIPTIONS}{subscription['id']}/change/").content.decode()
    assert ("<div><code>X-Shop</code>: alice</div><div><code>X-Key</code>: (secret)</div>"
            "<div><code>X-Region</code>: from attribute &#x27;region&#x27;</div>") in page
    assert "s3cret-value" not in page
    page = admin_client.get(f"{SUBSCRIPTIONS}{plain['id']}/change/").content.decode()
    assert "none (set through the API: secret values are never shown)" in page
    assert "none (set through the API)" in page and "none answered yet" in page  # no client certificate, handshake


def test_a_transformation_is_edited_here_through_the_service(admin_client, api):
    created = create_subscription(api, create_topic(api)["id"])
    page, data = admin_form(admin_client, created["id"])
    shown = admin_client.get(page).content.decode()
    assert 'name="transformation_0"' in shown and 'name="transformation_1"' in shown
    unfinished = "function handler(webhook) {\n  return webhook +\n}"
    refused = admin_client.post(page, {**data, "transformation_0": unfinished, "transformation_1": "on",
                                       "max_events_per_batch": 3})
    assert form_errors(refused.content.decode())["transformation"] == [
        "line 3: SyntaxError: Unexpected token &#x27;}&#x27;"]
    assert Subscription.objects.get(id=created["id"]).max_events_per_batch == 1  # nothing written
    handler = "function handler(webhook) {\n  return webhook;\n}"
    assert admin_client.post(page, {**data, "transformation_0": handler}).status_code == 302
    assert Subscription.objects.get(id=created["id"]).transformation == {"code": handler, "enabled": False}
    page, data = admin_form(admin_client, created["id"])
    assert admin_client.post(page, {**data, "transformation_1": "on"}).status_code == 302
    assert Subscription.objects.get(id=created["id"]).transformation["enabled"] is True
    page, data = admin_form(admin_client, created["id"])
    batching = admin_client.post(page, {**data, "max_events_per_batch": 3})
    assert "CloudEvents batches" in form_errors(batching.content.decode())["max_events_per_batch"][0]
    assert admin_client.post(page, {**data, "transformation_0": "  "}).status_code == 302  # empty code removes it
    assert Subscription.objects.get(id=created["id"]).transformation is None


def test_the_event_version_is_chosen_among_the_catalogs_through_the_service(admin_client, api, user):
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01")
    created = create_subscription(api, create_topic(api)["id"])
    event_version_create(event_type=customer, name="2026-06-01", down_converter="function handler(w) { return w; }")
    page, data = admin_form(admin_client, created["id"])
    shown = admin_client.get(page).content.decode()
    assert "Event versions received: customer.created : 2026-01-01 (newest: 2026-06-01)" in words(shown)
    assert [value for value in ("", "2026-06-01", "2026-01-01") if f'<option value="{value}"' in shown] == [
        "", "2026-06-01", "2026-01-01"]
    assert admin_client.post(page, {**data, "event_version": "2026-06-01"}).status_code == 302
    assert Subscription.objects.get(id=created["id"]).event_version == "2026-06-01"
    refused = admin_client.post(page, {**data, "event_version": "2030-01-01"})  # not one of the choices
    assert list(form_errors(refused.content.decode())) == ["event_version"]
    page, data = admin_form(admin_client, created["id"])
    assert admin_client.post(page, {**data, "event_version": ""}).status_code == 302  # follows the latest
    assert Subscription.objects.get(id=created["id"]).event_version == ""

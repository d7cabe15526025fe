"""The operator's first hour, in the admin and the API: buttons on the pages that need them, times to the second,
no edits or deletes of records, the policy that applies and why, offline API docs, a browsable API that lists and
documents every resource, and errors that say what to do."""

import re

import pytest
from django.contrib.staticfiles import finders
from rest_framework.authtoken.models import Token

from delivery import VERSION
from delivery.models import Attempt, Delivery
from subscriptions.models import Endpoint, Subscription
from tests.conftest import client_for, drain, settle
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def buttons(page: str) -> list[str]:
    return re.findall(r'<button type="submit" class="herald-button" id="herald-([a-z-]+)"', page)


def test_delivery_page_retry_now_button_sends_it_again(admin_client, traffic, receiver):
    dead = Delivery.objects.get(status="dead_lettered")
    page = admin_client.get(f"/admin/herald_delivery/delivery/{dead.id}/change/").content.decode()
    assert buttons(page) == ["retry"]
    assert "deletelink" not in page and 'name="_save"' not in page
    # What matters first: the state in words and the last error, the internals folded away.
    assert page.index("dead-lettered (max_attempts) after 2 attempt(s); last error: HTTP 500") < page.index("lease")
    assert re.search(r"attempt 2 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: HTTP 500", page)

    receiver.script = [Reply(status=200)]
    response = admin_client.post(f"/admin/herald_delivery/delivery/{dead.id}/do/retry/", follow=True)
    assert f"Delivery {dead.id} will be attempted now" in response.content.decode()
    drain()
    dead.refresh_from_db()
    assert dead.status == "succeeded"
    assert Attempt.objects.filter(delivery=dead).order_by("-number").first().queue == "manual"
    # A delivered one has nothing to retry; the refusal is a message, not an error page.
    assert buttons(admin_client.get(f"/admin/herald_delivery/delivery/{dead.id}/change/").content.decode()) == []
    response = admin_client.post(f"/admin/herald_delivery/delivery/{dead.id}/do/retry/", follow=True)
    assert "Retry now: A succeeded delivery cannot be retried." in response.content.decode()
    assert admin_client.get(f"/admin/herald_delivery/delivery/{dead.id}/do/retry/").status_code == 405
    assert admin_client.post(f"/admin/herald_delivery/delivery/{dead.id}/do/nothing/").status_code == 404


def test_records_are_never_edited_or_deleted_by_hand(admin_client, traffic):
    delivery = Delivery.objects.first()
    attempt = Attempt.objects.first()
    for path in (f"/admin/herald_delivery/delivery/{delivery.id}/delete/",
                 f"/admin/herald_delivery/attempt/{attempt.id}/delete/",
                 f"/admin/herald_delivery/message/{delivery.message_id}/delete/"):
        assert admin_client.post(path).status_code == 403, path
    listing = admin_client.get("/admin/herald_delivery/attempt/").content.decode()
    assert 'value="delete_selected"' not in listing
    # Times to the second, in lists and on pages.
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", listing)


def test_times_in_lists_show_seconds(admin_client, traffic):
    page = admin_client.get("/admin/herald_delivery/delivery/").content.decode()
    stamp = Delivery.objects.order_by("-id").first().last_attempt_at.strftime("%Y-%m-%d %H:%M:%S")
    assert stamp in page


def test_endpoint_page_has_buttons_not_save_and_shows_subscriptions_and_attempts(admin_client, traffic):
    topic, subscription = traffic
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    page = admin_client.get(f"/admin/herald_subscriptions/endpoint/{endpoint.id}/change/").content.decode()
    assert 'name="_save"' not in page and 'name="_continue"' not in page and "deletelink" not in page
    assert buttons(page) == ["disable", "freeze"]
    assert "subscriptions to this endpoint" in page.lower() and "console" in page
    assert 'id="herald-recent-attempts"' in page
    assert page.count('href="/admin/herald_delivery/attempt/') >= Attempt.objects.count()

    response = admin_client.post(f"/admin/herald_subscriptions/endpoint/{endpoint.id}/do/freeze/", follow=True)
    assert "Frozen" in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.state == "frozen" and endpoint.transitions.first().reason == "frozen by hand"
    page = admin_client.get(f"/admin/herald_subscriptions/endpoint/{endpoint.id}/change/").content.decode()
    assert buttons(page) == ["enable"]
    admin_client.post(f"/admin/herald_subscriptions/endpoint/{endpoint.id}/do/enable/")
    endpoint.refresh_from_db()
    assert endpoint.state == "active"


def test_subscription_page_shows_the_effective_policy_and_where_it_comes_from(admin_client, api, receiver,
                                                                              traffic):
    topic, own = traffic
    page = admin_client.get(f"/admin/herald_subscriptions/subscription/{own['id']}/change/").content.decode()
    # section by section: its own retry schedule and limits, the topic's event-grid jitter and permanent codes
    assert ("retryLimits, retrySchedule from the subscription&#x27;s own delivery policy; jitter, responsePolicy from "
            "the delivery policy of topic &#x27;console&#x27;." in page)

    inherits = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/2"},
                        format="json").json()
    page = admin_client.get(f"/admin/herald_subscriptions/subscription/{inherits['id']}/change/").content.decode()
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
    page = admin_client.get(f"/admin/herald_subscriptions/subscription/{plain['id']}/change/").content.decode()
    assert "jitter, retryLimits, retrySchedule from Herald&#x27;s default, HERALD_DEFAULT_DELIVERY_POLICY" in page


def test_subscription_buttons_redrive_pause_and_resend_confirmation(admin_client, api, receiver, traffic,
                                                                     settings):
    topic, subscription = traffic
    url = f"/admin/herald_subscriptions/subscription/{subscription['id']}/"
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
    page_url = f"/admin/herald_subscriptions/subscription/{pending['id']}/"
    assert buttons(admin_client.get(page_url + "change/").content.decode()) == ["resend-confirmation"]
    receiver.script = lambda request: Reply(body=b'{"validationResponse": "%s"}' % request.json()["data"][
        "token"].encode())
    response = admin_client.post(page_url + "do/resend-confirmation/", follow=True)
    assert "A new confirmation request is on its way" in response.content.decode()
    drain()
    assert Subscription.objects.get(id=pending["id"]).status == "confirmed"


def test_message_page_lists_every_subscription_with_its_outcome(admin_client, api, receiver, traffic):
    topic, subscription = traffic
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/eu",
                                     "filter_policy": {"region": ["eu"]}}, format="json")
    message_id = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": "good", "attributes": {"region": "us"}},
                          format="json").json()["message_id"]
    settle()
    page = admin_client.get(f"/admin/herald_delivery/message/{message_id}/change/").content.decode()
    assert 'data-outcome="delivery_created"' in page and 'data-outcome="filtered_out"' in page
    assert "filtered out: attribute &#x27;region&#x27; is &quot;us&quot;, which meets none of [&quot;eu&quot;]" in page
    assert "delivered after 1 attempt(s)" in page


def test_the_policy_preview_says_what_ends_the_schedule(api):
    preview = api.post("/api/policies/preview/", {"delivery_policy": "event-grid"}, format="json").json()
    assert preview["max_attempts"] == 30 and len(preview["schedule"]) == 11
    assert preview["ends"] == ("ends after attempt 11 (of at most 30): attempt 12 would come after the time-to-live "
                               "of 86400 s")
    workfront = api.post("/api/policies/preview/", {"delivery_policy": "workfront"}, format="json").json()
    assert workfront["ends"] == "ends after attempt 12: the maximum of 12 attempts"


def test_root_and_view_site_lead_to_the_dashboard(client, admin_client):
    assert client.get("/").status_code == 302 and client.get("/").url == "/dashboard/"
    assert admin_client.get("/", follow=True).redirect_chain[-1][0] == "/dashboard/"


def test_api_docs_are_served_from_static_files(client):
    for path in ("/api/docs/", "/api/redoc/"):
        page = client.get(path).content.decode()
        assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', page)
        assert assets, page
        assert not re.search(r"https?://", " ".join(assets)), assets
        for asset in assets:
            if asset == "/api/redoc/redoc.standalone.js":  # Herald's copy of ReDoc's bundle, its logo inlined
                bundle = client.get(asset)
                assert bundle.status_code == 200 and bundle["Content-Type"].startswith("application/javascript")
                assert b"cdn.redoc.ly" not in bundle.content and len(bundle.content) > 100_000
                continue
            assert asset.startswith("/static/drf_spectacular_sidecar/"), asset
            assert finders.find(asset.removeprefix("/static/")), asset
        assert "cdn.jsdelivr" not in page and "unpkg" not in page


def test_api_root_lists_every_resource(api):
    root = api.get("/api/").json()
    assert root.pop("version") == VERSION  # which Herald answers
    assert set(root) == {"topics", "subscriptions", "endpoints", "messages", "deliveries", "tenants", "event-types",
                         "portal", "policies/preview", "schema", "docs", "redoc"}
    for url in root.values():
        assert api.get(url).status_code in (200, 405), url  # the preview takes POST


def test_action_pages_show_their_own_request_forms(api):
    topic = api.post("/api/topics/", {"name": "forms"}, format="json").json()
    page = api.get(f"/api/topics/{topic['id']}/publish/", HTTP_ACCEPT="text/html").content.decode()
    form = page.split('id="post-generic-content-form"')[1]
    assert "&quot;payload&quot;" in form and "&quot;attributes&quot;" in form and "&quot;description&quot;" not in form
    batch = api.get(f"/api/topics/{topic['id']}/publish-batch/", HTTP_ACCEPT="text/html").content.decode()
    assert "&quot;entries&quot;" in batch.split('id="post-generic-content-form"')[1]
    preview = api.get("/api/policies/preview/", HTTP_ACCEPT="text/html").content.decode()
    assert "&quot;delivery_policy&quot;" in preview.split('id="post-generic-content-form"')[1]


def test_authentication_and_content_type_errors_say_what_to_do(user, client):

    token = Token.objects.create(user=user)
    assert client.get("/api/topics/", HTTP_AUTHORIZATION=f"Bearer {token.key}").status_code == 200
    assert client.get("/api/topics/", HTTP_AUTHORIZATION=f"Token {token.key}").status_code == 200
    missing = client.get("/api/topics/")
    assert missing.status_code == 401 and "Authorization: Token <key>" in missing.json()["detail"]
    basic = client.get("/api/topics/", HTTP_AUTHORIZATION="Basic YWRtaW46eA==")
    assert basic.status_code == 401 and "Unsupported authorization scheme 'Basic'" in basic.json()["detail"]
    wrong = client.get("/api/topics/", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and wrong.json()["detail"] == "Invalid token."

    # `curl -d '{"name": "x"}'` without a Content-Type sends a form.
    api = client_for(user)
    form = api.generic("POST", "/api/topics/", '{"name": "x"}', content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415
    assert "Content-Type: application/json" in form.json()["detail"]
    assert "application/x-www-form-urlencoded" in form.json()["detail"]

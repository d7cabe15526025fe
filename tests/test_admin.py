"""The admin console: every page renders, actions call the services, secrets stay hidden, the dashboard."""

import json
import re
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone
from rq import Worker

from delivery.engine.accounts import tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.sending import attempts
from delivery.engine.state import health
from delivery.models import Attempt, Delivery, Replay
from delivery.receiver import generate_secret
from delivery.rules import tenant_rules
from delivery.web.console.deliveries import AttemptInline
from subscriptions.models import Endpoint, EventType, Subscription, Tenant, TenantKey
from tests.conftest import settle, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_page_renders(admin_client, traffic):
    topic, subscription = traffic
    delivery = Delivery.objects.get(status="dead_lettered")
    attempt = Attempt.objects.filter(delivery=delivery).first()
    pages = ["/admin/", "/dashboard/", "/dashboard/?span=1h"]
    for model in ["herald_subscriptions/topic", "herald_subscriptions/subscription", "herald_subscriptions/endpoint",
                  "herald_delivery/message", "herald_delivery/delivery", "herald_delivery/attempt"]:
        pages += [f"/admin/{model}/", f"/admin/{model}/?q=console"]
    pages += [f"/admin/herald_subscriptions/topic/{topic['id']}/change/",
              f"/admin/herald_subscriptions/subscription/{subscription['id']}/change/",
              f"/admin/herald_subscriptions/endpoint/{subscription['endpoint_id']}/change/",
              f"/admin/herald_delivery/delivery/{delivery.id}/change/",
              f"/admin/herald_delivery/attempt/{attempt.id}/change/",
              "/admin/herald_delivery/delivery/?status__exact=dead_lettered",
              "/admin/herald_delivery/attempt/?outcome__exact=success"]
    for page in pages:
        assert admin_client.get(page).status_code == 200, page


def test_attempt_detail_shows_request_and_response_excerpts(admin_client, traffic):
    attempt = Attempt.objects.filter(outcome="retryable_failure").first()
    page = admin_client.get(f"/admin/herald_delivery/attempt/{attempt.id}/change/").content.decode()
    assert "webhook-signature" in page and "&quot;data&quot;:&quot;bad&quot;" in page
    assert "{&quot;error&quot;:&quot;nope&quot;}" in page
    assert admin_client.post(f"/admin/herald_delivery/attempt/{attempt.id}/delete/").status_code == 403


def test_policy_fields_show_the_schedule_they_produce(admin_client, traffic):
    topic, subscription = traffic
    topic_page = admin_client.get(f"/admin/herald_subscriptions/topic/{topic['id']}/change/").content.decode()
    assert "herald-schedule" in topic_page and "12.0 h" in topic_page  # event-grid: 12 h repeats
    page = admin_client.get(f"/admin/herald_subscriptions/subscription/{subscription['id']}/change/").content.decode()
    assert "max attempts 2" in page and "0.1 s" in page


def test_dashboard_shows_failures_states_dead_letters_and_queues(admin_client, traffic, processes, redis_conn):
    processes.worker()
    wait_until(lambda: Worker.all(connection=redis_conn))
    page = admin_client.get("/dashboard/").content.decode()
    dead = Delivery.objects.get(status="dead_lettered")
    assert f'href="/admin/herald_delivery/delivery/{dead.id}/change/"' in page  # the failed delivery is one click away
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "max_attempts : 1" in text
    assert "succeeded 1 failed 2" in text  # "good" succeeded once; "bad" failed twice
    assert "deliveries : 0 job(s) waiting" in text
    assert "active 1" in text
    assert "No worker is running." not in text


def test_actions_call_the_services(admin_client, traffic, receiver, run_worker):
    _, subscription = traffic
    receiver.script = [Reply(status=200)]
    url = "/admin/herald_subscriptions/subscription/"
    response = admin_client.post(url, {"action": "redrive", "_selected_action": [subscription["id"]]}, follow=True)
    assert "Redrove 1 dead letter(s)." in response.content.decode()
    settle()
    assert not Delivery.objects.filter(status="dead_lettered").exists()

    admin_client.post(url, {"action": "pause", "_selected_action": [subscription["id"]]})
    assert Subscription.objects.get(id=subscription["id"]).status == "paused"
    admin_client.post(url, {"action": "resume", "_selected_action": [subscription["id"]]})
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"

    delivery = Delivery.objects.filter(status="succeeded").first()
    response = admin_client.post("/admin/herald_delivery/delivery/", {"action": "retry_now",
                                                               "_selected_action": [delivery.id]}, follow=True)
    assert "cannot be retried" in response.content.decode()


def test_admin_refuses_invalid_policies_and_unsafe_edits(admin_client, traffic):
    topic, subscription = traffic
    response = admin_client.post(f"/admin/herald_subscriptions/topic/{topic['id']}/change/", {
        "owner": 1, "name": "console", "description": "", "delivery_policy": '{"jitter": 7}'})
    assert response.status_code == 200 and "jitter: must be at most 0.5" in response.content.decode()
    endpoint_page = f"/admin/herald_subscriptions/endpoint/{subscription['endpoint_id']}/change/"
    page = admin_client.get(endpoint_page).content.decode()
    assert 'name="url"' not in page and 'name="owner"' not in page
    assert admin_client.get("/admin/herald_subscriptions/subscription/add/").status_code == 403
    assert admin_client.get("/admin/herald_subscriptions/endpoint/add/").status_code == 403


def test_operator_can_stop_retrying_a_delivery(admin_client, api, receiver):
    receiver.script = [Reply(status=500)]
    topic = api.post("/api/topics/", {"name": "stop"}, format="json").json()
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json")
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    settle()  # one failed attempt; the next (workfront) is 84.8 s away
    delivery = Delivery.objects.get()
    assert delivery.status == "pending" and delivery.attempt_count == 1

    response = admin_client.post("/admin/herald_delivery/delivery/", {"action": "dead_letter",
                                                               "_selected_action": [delivery.id]}, follow=True)
    assert "Dead-lettered 1 deliveries." in response.content.decode()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.dead_letter_reason) == ("dead_lettered", "manual")


def test_the_replay_action_asks_for_a_window_then_replays(admin_client, traffic, receiver, run_worker):
    _, subscription = traffic
    url = "/admin/herald_subscriptions/subscription/"
    form = admin_client.post(url, {"action": "replay", "_selected_action": [subscription["id"]]})
    assert form.status_code == 200 and 'name="since"' in form.content.decode()
    since = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    before = len(receiver.requests)
    response = admin_client.post(url, {"action": "replay", "_selected_action": [subscription["id"]], "apply": "1",
                                       "since": since}, follow=True)
    assert f"Subscription {subscription['id']}: replay " in response.content.decode()
    assert Replay.objects.get().messages == 2 and Replay.objects.get().requested_by.is_superuser
    settle()
    replayed = receiver.requests[before:]
    assert len(replayed) >= 2 and all(r.headers["herald-replay"] == str(Replay.objects.get().id) for r in replayed)
    bad = admin_client.post(url, {"action": "replay", "_selected_action": [subscription["id"]], "apply": "1",
                                  "since": "not a time"})
    assert bad.status_code == 200 and "Enter a valid date/time" in bad.content.decode()


def admin_form(admin_client, subscription_id: int) -> tuple[str, dict]:
    """The subscription's change page and the values its form would post back unchanged."""
    page = f"/admin/herald_subscriptions/subscription/{subscription_id}/change/"
    stored = Subscription.objects.get(id=subscription_id)
    data = {"delivery_policy": "", "filter_policy": "", "filter_policy_scope": stored.filter_policy_scope,
            "event_types": "[]", "max_events_per_batch": stored.max_events_per_batch,
            "preferred_batch_size_kb": stored.preferred_batch_size_kb}
    if stored.ordered_delivery:
        data["ordered_delivery"] = "on"
    if stored.raw_message_delivery:
        data["raw_message_delivery"] = "on"
    return page, data


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


def test_the_dashboard_says_why_for_every_failing_row(admin_client, api, receiver):
    receiver.script = [Reply(status=503)]
    topic = api.post("/api/topics/", {"name": "why"}, format="json").json()
    subscription = api.post("/api/subscriptions/", {
        "topic": topic["id"], "endpoint": receiver.url,
        "delivery_policy": {"retrySchedule": {"delays": [3600]}}}, format="json").json()
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    delivery = Delivery.objects.get()
    attempts.process([delivery.id], "deliveries")
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    health.endpoint_disable(endpoint=endpoint)

    text = " ".join(re.sub(r"<[^>]+>", " ", admin_client.get("/dashboard/").content.decode()).split())

    assert "1 attempt(s) failed; next attempt at" in text and "last error: HTTP 503" in text
    assert "endpoint disabled: disabled by hand" in text  # the pending retry's row says its endpoint is why
    assert text.count("disabled by hand") == 2  # and the endpoint's own row says it too


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


def test_a_deliverys_page_shows_one_moment_while_a_worker_records(admin_client, api, receiver, monkeypatch):
    """A try recorded while the page is being read (right after "Retry now") shows neither half of it."""
    receiver.script = [Reply(status=503)]
    topic = api.post("/api/topics/", {"name": "moment"}, format="json").json()
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                     "delivery_policy": {"retrySchedule": {"delays": [3600]}}}, format="json")
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    delivery = Delivery.objects.get()
    attempts.process([delivery.id], "deliveries")
    db = connection.settings_dict
    worker = psycopg.connect(f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={db['NAME']}",
                             autocommit=True)
    real = AttemptInline.get_queryset

    def meanwhile(self, request):  # between reading the delivery and reading its attempts, a worker records a try
        worker.execute("UPDATE herald_delivery_delivery SET status = 'succeeded', attempt_count = 2 WHERE id = %s",
                       [delivery.id])
        worker.execute("INSERT INTO herald_delivery_attempt (delivery_id, number, queue, started_at, duration_ms, "
                       "request_url, request_headers, request_body, response_status, response_headers, "
                       "response_body, error_class, error_detail, outcome) SELECT delivery_id, 2, 'manual', now(), "
                       "1, request_url, '{}', '', 200, '{}', '', '', '', 'success' FROM herald_delivery_attempt "
                       "WHERE delivery_id = %s", [delivery.id])
        return real(self, request)

    monkeypatch.setattr(AttemptInline, "get_queryset", meanwhile)
    try:
        page = admin_client.get(f"/admin/herald_delivery/delivery/{delivery.id}/change/").content.decode()
    finally:
        worker.close()
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    # the page before the try, consistently: its status, its words and its attempts all say one attempt failed
    assert "Status: pending" in text and "attempt 1 of delivery" in text
    assert "attempt 2 of delivery" not in text and "delivered after" not in text
    assert Delivery.objects.get().status == "succeeded"  # which did happen


def test_tenants_in_the_admin(admin_client, user):
    """Register a tenant, give it a key (shown once, in the message), revoke it; the catalog refuses a bad schema."""
    added = admin_client.post("/admin/herald_subscriptions/tenant/add/", {
        "owner": user.id, "external_id": "acme", "name": "Acme Ltd", "metadata": "{}"})
    assert added.status_code == 302, added.content[:2000]
    tenant = Tenant.objects.get(external_id="acme")
    made = admin_client.post("/admin/herald_subscriptions/tenant/",
                             {"action": "new_key", "_selected_action": [tenant.id]}, follow=True)
    key = TenantKey.objects.get(tenant=tenant)
    shown = re.search(r"htk_[A-Za-z0-9_-]+", made.content.decode()).group(0)
    assert shown.startswith(key.prefix) and key.key_hash != shown
    assert shown not in admin_client.get(f"/admin/herald_subscriptions/tenant/{tenant.id}/change/").content.decode()
    admin_client.post("/admin/herald_subscriptions/tenantkey/", {"action": "revoke", "_selected_action": [key.id]})
    assert TenantKey.objects.get(id=key.id).revoked_at is not None
    for page in ["/admin/herald_subscriptions/tenant/", "/admin/herald_subscriptions/tenantkey/",
                 "/admin/herald_subscriptions/eventtype/", "/admin/herald_subscriptions/portal/",
                 f"/admin/herald_subscriptions/tenant/{tenant.id}/change/"]:
        assert admin_client.get(page).status_code == 200, page
    refused = admin_client.post("/admin/herald_subscriptions/eventtype/add/", {
        "owner": user.id, "name": "order.created", "schema": '{"type": "nonsense"}', "example": "null"})
    assert refused.status_code == 200 and "not a valid JSON Schema" in refused.content.decode()
    assert not EventType.objects.exists()


def test_a_tenants_rules_hold_at_every_door(admin_client, api, user):
    """Metadata is an object of at most 4 KiB as JSON (rules/tenant_rules.py), asked by the service: through the
    API, the admin and Python alike, refused with the field named and nothing written."""
    big = {"notes": "x" * tenant_rules.MAX_METADATA_BYTES}
    through_api = api.post("/api/tenants/", {"external_id": "acme", "name": "Acme", "metadata": big}, format="json")
    assert through_api.status_code == 400 and "metadata" in through_api.json(), through_api.content
    with pytest.raises(ApplicationError) as refused:
        tenancy.tenant_create(owner=user, external_id="acme", metadata=big)
    assert refused.value.field == "metadata"
    assert not Tenant.objects.exists()

    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme", name="Acme")
    assert api.patch(f"/api/tenants/{tenant.id}/", {"metadata": ["a list"]}, format="json").json() == {
        "metadata": ["must be an object"]}
    page = admin_client.post(f"/admin/herald_subscriptions/tenant/{tenant.id}/change/", {
        "name": "Acme Ltd", "metadata": json.dumps(big)})
    assert page.status_code == 200 and "must be at most 4096 bytes as JSON" in page.content.decode()
    assert Tenant.objects.get(id=tenant.id).name == "Acme"  # nothing written, the name neither
    saved = admin_client.post(f"/admin/herald_subscriptions/tenant/{tenant.id}/change/", {
        "name": "Acme Ltd", "metadata": '{"plan": "gold"}'})
    assert saved.status_code == 302
    assert (Tenant.objects.get(id=tenant.id).name, Tenant.objects.get(id=tenant.id).metadata) == (
        "Acme Ltd", {"plan": "gold"})


def test_the_console_shows_every_error_at_once(admin_client, user):
    """A field the form itself refuses does not hide what the service says of the others (it is asked too, and
    what it wrote is rolled back)."""
    page = admin_client.post("/admin/herald_subscriptions/eventtype/add/", {
        "owner": user.id, "name": "a.d", "description": "d" * 1001, "schema": "null", "example": "null"})
    errors = re.findall(r'class="errorlist[^>]*>(.*?)</ul', page.content.decode(), re.S)
    assert any("required" in e for e in errors) and any("at most 1000 characters" in e for e in errors), errors
    assert not EventType.objects.exists()

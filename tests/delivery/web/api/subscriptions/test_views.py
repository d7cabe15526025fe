"""The subscriptions' view set (delivery/web/api/subscriptions/views.py): its secret shown once, endpoints shared by
URL, addresses, policies, filters, credentials and transformations checked with the reason, nothing half-written; a
changed URL takes its pending deliveries along; a transformation test-run answers what would be sent, or why not; an
event version upgrade is previewed on the latest event, then made with PATCH."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from delivery.engine.accounts import recovery, tenancy
from delivery.engine.accounts.confirmation import token_hash
from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.engine.accounts.tenancy import NOT_ALLOWED
from delivery.models import Delivery
from subscriptions.models import Endpoint, EventType, Subscription
from tests.conftest import subscribe
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture  # the tenants' fixture, shared


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_subscription_secret_only_in_create_response(api):
    topic = create_topic(api)
    created = create_subscription(api, topic["id"])
    assert created["secret"].startswith("whsec_")
    assert "secret" not in api.get(f"/api/subscriptions/{created['id']}/").json()
    assert "secret" not in api.get("/api/subscriptions/").json()["results"][0]
    assert created["status"] == "confirmed"  # HERALD_REQUIRE_CONFIRMATION is off in tests
    assert created["effective_delivery_policy"]["preset"] == "workfront"


def test_subscriptions_to_one_url_share_an_endpoint_record(api):
    topic_a, topic_b = create_topic(api, "a"), create_topic(api, "b")
    first = create_subscription(api, topic_a["id"], url="HTTP://Example.COM:80/hook")
    second = create_subscription(api, topic_b["id"], url="http://example.com/hook")
    assert first["endpoint_id"] == second["endpoint_id"]
    assert first["endpoint"] == "http://example.com/hook"
    assert Endpoint.objects.count() == 1


@pytest.mark.parametrize("url, reason", [
    ("ftp://example.com/x", "only http and https"),
    ("http://", "no host"),
    ("http://user:pw@example.com/", "credentials"),
    ("not a url", "only http and https"),
])
def test_bad_endpoint_urls_are_rejected_with_the_reason(api, url, reason):
    topic = create_topic(api)
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url}, format="json")
    assert response.status_code == 400
    assert reason in response.json()["endpoint"][0]
    assert Subscription.objects.count() == 0


def test_invalid_delivery_policy_names_every_field_and_stores_nothing(api):
    topic = create_topic(api)
    response = api.post("/api/subscriptions/", {
        "topic": topic["id"], "endpoint": "http://example.com/",
        "delivery_policy": {"healthyRetryPolicy": {"numRetries": 101, "backoffFunction": "cubic"}, "jitter": 0.9},
    }, format="json")
    assert response.status_code == 400
    errors = response.json()["delivery_policy"]
    assert set(errors) == {"healthyRetryPolicy.numRetries", "healthyRetryPolicy.backoffFunction", "jitter"}
    assert Subscription.objects.count() == 0 and Endpoint.objects.count() == 0


@pytest.mark.parametrize("url", ["http://127.0.0.1/x", "http://2130706433/", "http://0x7f.1/", "http://[::1]/",
                                 "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/latest/meta-data/",
                                 "http://10.0.0.5/", "http://localhost:8000/"])
def test_private_addresses_are_refused_at_subscribe_time(api, settings, url):
    settings.HERALD_ALLOWED_NETWORKS = []
    topic = create_topic(api)
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url}, format="json")
    assert response.status_code == 400
    assert "webhooks may not be sent there" in response.json()["endpoint"][0]
    assert "HERALD_ALLOWED_NETWORKS" in response.json()["endpoint"][0]  # what to do about it
    assert Subscription.objects.count() == 0


def test_changing_the_url_moves_pending_deliveries_with_it(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"], url="http://127.0.0.1:9/old")
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    moved = api.patch(f"/api/subscriptions/{subscription['id']}/", {"endpoint": "http://127.0.0.1:9/new"},
                      format="json").json()
    assert moved["endpoint"] == "http://127.0.0.1:9/new" and moved["endpoint_id"] != subscription["endpoint_id"]
    assert Delivery.objects.get().endpoint_id == moved["endpoint_id"]


def test_a_subscription_confirmed_without_a_handshake_says_since_when(api, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = False
    topic = create_topic(api)
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://example.com/hook"},
                       format="json").json()
    assert created["status"] == "confirmed"
    assert created["confirmed_at"] is not None
    assert abs(parse_datetime(created["confirmed_at"]) - parse_datetime(created["created_at"])).total_seconds() < 60


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("cidr", [5, True, ["10.0.0.0/8"], {"a": 1}])
def test_cidr_takes_only_a_network_string(api, receiver, cidr):
    topic = api.post("/api/topics/", {"name": "t"}, format="json").json()
    answer = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                              "filter_policy": {"ip": [{"cidr": cidr}]}}, format="json")
    assert answer.status_code == 400 and "ip[0].cidr" in json.dumps(answer.json())


@pytest.mark.django_db(transaction=True)
def test_adding_oauth2_to_a_subscription_with_an_authorization_header_is_refused(api, receiver):
    _, subscription = subscribe(api, receiver, delivery_headers=[{"name": "Authorization", "value": "Basic eA=="}])
    url = f"/api/subscriptions/{subscription['id']}/"
    answer = api.patch(url, {"oauth_token_url": receiver.url + "/token", "oauth_client_id": "c",
                             "oauth_client_secret": "s"}, format="json")
    assert answer.status_code == 400 and "Authorization" in answer.json()["delivery_headers"][0]
    assert api.get(url).json()["oauth_token_url"] == ""
    both = api.patch(url, {"oauth_token_url": receiver.url + "/token", "oauth_client_id": "c",
                           "oauth_client_secret": "s", "delivery_headers": []}, format="json")
    assert both.status_code == 200


def test_pause_and_resume_answer_the_subscription_and_refuse_what_does_not_follow(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    url = f"/api/subscriptions/{subscription['id']}/"
    paused = api.post(url + "pause/")
    assert (paused.status_code, paused.json()["status"]) == (200, "paused")
    again = api.post(url + "pause/")
    assert (again.status_code, again.json()) == (409, {
        "detail": "Only a confirmed subscription can be paused; this one is paused."})
    resumed = api.post(url + "resume/")
    assert (resumed.status_code, resumed.json()["status"]) == (200, "confirmed")
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"


def test_dead_letters_are_listed_with_their_reasons_and_redriven(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    for n in range(3):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": n}, format="json")
    first, second, third = Delivery.objects.order_by("id")
    for delivery in (first, third):
        recovery.delivery_dead_letter(delivery=delivery)
    url = f"/api/subscriptions/{subscription['id']}/"
    dead = api.get(url + "dead-letters/", {"limit": 1}).json()
    assert (dead["count"], dead["by_reason"]) == (2, {"manual": 2})
    assert [(row["id"], row["status"], row["dead_letter_reason"]) for row in dead["results"]] == [
        (third.id, "dead_lettered", "manual")]  # the newest first, a page at a time
    redriven = api.post(url + "redrive/", {}, format="json")
    assert (redriven.status_code, redriven.json()) == (202, {"count": 2})
    assert sorted(Delivery.objects.values_list("id", "status")) == [
        (first.id, "pending"), (second.id, "pending"), (third.id, "pending")]
    assert api.get(url + "dead-letters/").json()["count"] == 0


def test_a_confirmation_link_confirms_without_an_api_token_and_names_the_subscription(api, client):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    Subscription.objects.filter(id=subscription["id"]).update(
        status="pending_confirmation", confirmed_at=None, confirmation_token_hash=token_hash("t0ken"),
        confirmation_expires_at=timezone.now() + timedelta(hours=1))
    wrong = client.get("/api/subscriptions/confirm/", {"token": "not-it"})
    assert (wrong.status_code, wrong.json()) == (400, {"token": ["This confirmation token is not valid."]})
    confirmed = client.get("/api/subscriptions/confirm/", {"token": "t0ken"})
    assert (confirmed.status_code, confirmed.json()) == (200, {"detail": "Subscription confirmed.",
                                                               "subscription_id": subscription["id"]})
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"


# Transformations: written with the subscription (compiled, or refused with the line), test-run on their own.
SLACK = ("function handler(webhook) {\n  webhook.payload = {text: 'New order ' + webhook.payload.id};\n"
         "  return webhook;\n}")


def transformed(api, **extra) -> tuple[dict, str]:
    """A subscription to `orders` and the URL of its transformation's test-run."""
    created = create_subscription(api, create_topic(api)["id"], **extra)
    return created, f"/api/subscriptions/{created['id']}/transformation/test/"


def test_a_transformation_is_written_read_and_removed_with_the_subscription(api):
    created, _ = transformed(api, transformation={"code": SLACK})
    assert created["transformation"] == {"code": SLACK, "enabled": True}
    url = f"/api/subscriptions/{created['id']}/"
    off = api.patch(url, {"transformation": {"code": SLACK, "enabled": False}}, format="json")
    assert (off.status_code, off.json()["transformation"]) == (200, {"code": SLACK, "enabled": False})
    removed = api.patch(url, {"transformation": None}, format="json")
    assert (removed.status_code, removed.json()["transformation"]) == (200, None)
    assert Subscription.objects.get(id=created["id"]).transformation is None


@pytest.mark.parametrize("transformation, reason", [
    ({"code": "function handler(webhook) {\n  return webhook +\n}"}, "line 3: SyntaxError: Unexpected token '}'"),
    ({"code": "x" * 65_537}, "the code is larger than 65536 bytes (HERALD_TRANSFORM_CODE_MAX_BYTES)"),
    ({"code": SLACK, "runtime": "node"}, 'has no runtime: must be {"code": "<JavaScript defining function '
                                         'handler(webhook)>", "enabled": true} or null'),
    ("function handler(w) { return w; }", 'must be {"code": "<JavaScript defining function handler(webhook)>", '
                                          '"enabled": true} or null'),
])
def test_a_transformation_that_cannot_run_is_refused_with_the_reason_and_nothing_is_written(api, transformation,
                                                                                            reason):
    created, _ = transformed(api)
    answer = api.patch(f"/api/subscriptions/{created['id']}/", {"transformation": transformation,
                                                                "event_types": ["order.created"]}, format="json")
    assert (answer.status_code, answer.json()) == (400, {"transformation": [reason]})
    stored = Subscription.objects.get(id=created["id"])
    assert (stored.transformation, stored.event_types) == (None, [])
    made = api.post("/api/subscriptions/", {"topic": created["topic"], "endpoint": "http://127.0.0.1:9/other",
                                            "transformation": transformation}, format="json")
    assert (made.status_code, made.json()) == (400, {"transformation": [reason]})


def test_batches_and_a_transformation_are_refused_in_either_order(api):
    created, _ = transformed(api, max_events_per_batch=10)
    url = f"/api/subscriptions/{created['id']}/"
    answer = api.patch(url, {"transformation": {"code": SLACK}}, format="json")
    assert answer.status_code == 400 and "CloudEvents batches" in answer.json()["transformation"][0]
    assert api.patch(url, {"transformation": {"code": SLACK}, "max_events_per_batch": 1},
                     format="json").status_code == 200
    answer = api.patch(url, {"max_events_per_batch": 10}, format="json")
    assert answer.status_code == 400 and "CloudEvents batches" in answer.json()["max_events_per_batch"][0]


def test_a_test_run_on_a_given_payload_answers_what_would_be_sent(api):
    _, url = transformed(api, transformation={"code": SLACK})
    answer = api.post(url, {"payload": {"id": "ord_1042"}}, format="json")
    assert (answer.status_code, answer.json()) == (200, {"ok": True, "method": "POST",
                                                         "payload": {"text": "New order ord_1042"},
                                                         "cancelled": False})
    put = "function handler(webhook) {\n  webhook.method = 'PUT';\n  return webhook;\n}"
    assert api.post(url, {"code": put, "payload": [1]}, format="json").json() == {
        "ok": True, "method": "PUT", "payload": [1], "cancelled": False}  # the code given, not the saved one
    assert Subscription.objects.get().transformation["code"] == SLACK


def test_a_test_run_takes_the_catalogs_example_of_the_first_event_type_or_the_one_named(api, user):
    EventType.objects.create(owner=user, name="order.created", example={"id": "ord_1"})
    EventType.objects.create(owner=user, name="order.paid", example={"id": "ord_2"})
    _, url = transformed(api, event_types=["order.created", "order.paid"], transformation={"code": SLACK})
    assert api.post(url, {}, format="json").json()["payload"] == {"text": "New order ord_1"}
    assert api.post(url, {"event_type": "order.paid"}, format="json").json()["payload"] == {
        "text": "New order ord_2"}
    echo = "function handler(webhook) { webhook.payload = webhook.eventType; return webhook; }"
    assert api.post(url, {"code": echo, "payload": 1}, format="json").json()["payload"] == "order.created"


def test_a_cancelled_send_and_a_failing_handler_are_answers_not_errors(api):
    _, url = transformed(api)
    cancel = "function handler(webhook) {\n  webhook.cancel = webhook.payload.test;\n  return webhook;\n}"
    assert api.post(url, {"code": cancel, "payload": {"test": True}}, format="json").json() == {
        "ok": True, "method": "POST", "payload": {"test": True}, "cancelled": True}
    failing = "function handler(webhook) {\n  const order = null;\n  return order.id;\n}"
    answer = api.post(url, {"code": failing, "payload": {}}, format="json")
    assert (answer.status_code, answer.json()) == (200, {
        "ok": False, "error": "TypeError: Cannot read properties of null (reading 'id')", "line": 3})
    looping = "function handler(webhook) {\n  while (true) {}\n}"
    assert api.post(url, {"code": looping, "payload": {}}, format="json").json() == {
        "ok": False, "error": "timed out after 50 ms", "line": None}


@pytest.mark.parametrize("body, field, reason", [
    ({"payload": {}}, "code", "give the code to test: this subscription has no transformation saved"),
    ({"code": SLACK}, "payload", "give a payload to test with: no event type of the catalog is named, whose "
                                 "example it would take"),
    ({"code": SLACK, "event_type": "order.refunded"}, "payload",
     "give a payload to test with: the event type 'order.refunded' has no example in the catalog"),
    ({"code": "x" * 65_537, "payload": {}}, "code",
     "the code is larger than 65536 bytes (HERALD_TRANSFORM_CODE_MAX_BYTES)"),
    ({"code": "", "payload": {}}, "code", "This field may not be blank."),
    ({"code": SLACK, "payload": {}, "script": "x"}, "script", "unknown field; this request takes code, event_type, "
                                                             "payload"),
])
def test_a_test_run_that_cannot_be_made_is_a_400_naming_the_field(api, body, field, reason):
    _, url = transformed(api)
    answer = api.post(url, body, format="json")
    assert (answer.status_code, answer.json()) == (400, {field: [reason]})


def test_another_owners_subscription_is_not_found_and_runs_nothing(api, other_api):
    _, url = transformed(api, transformation={"code": SLACK})
    assert other_api.post(url, {"payload": {"id": 1}}, format="json").status_code == 404


def test_a_tenant_writes_and_test_runs_a_transformation_where_its_owner_allows_it(shop, user):
    acme, sub = shop["acme"]["client"], shop["acme"]["subscription"]["id"]
    url = f"/api/subscriptions/{sub}/"
    refused = acme.patch(url, {"transformation": {"code": SLACK}}, format="json")
    assert (refused.status_code, refused.json()) == (403, {"transformation": [NOT_ALLOWED]})
    assert acme.post(url + "transformation/test/", {"code": SLACK, "payload": {"id": 7}},
                     format="json").status_code == 403
    tenancy.portal_update(owner=user, allow_transformations=True)
    assert acme.patch(url, {"transformation": {"code": SLACK}}, format="json").status_code == 200
    assert acme.post(url + "transformation/test/", {"payload": {"id": 7}}, format="json").json()["payload"] == {
        "text": "New order 7"}


TO_JANUARY = "function handler(webhook) {\n  webhook.payload = {name: webhook.payload.full_name};\n  return webhook;\n}"


def versioned(user, down_converter=TO_JANUARY) -> None:
    """customer.created: January's {name}, and June's {full_name} (its example: Ada's) with its down-converter."""
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01", example={"name": "Ada"})
    event_version_create(event_type=customer, name="2026-06-01", example={"full_name": "Ada"},
                         down_converter=down_converter)


def test_an_upgrade_is_previewed_on_the_latest_event_then_made(api, user):
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01")
    topic = create_topic(api, "customers")
    created = create_subscription(api, topic["id"], event_types=["customer.created"])
    assert created["event_version"] == "2026-01-01"
    event_version_create(event_type=customer, name="2026-06-01", down_converter=TO_JANUARY)
    published = api.post(f"/api/topics/{topic['id']}/publish/", {
        "payload": {"full_name": "Grace Hopper"}, "event_type": "customer.created"}, format="json").json()
    url = f"/api/subscriptions/{created['id']}/"
    answer = api.post(url + "event-version/preview/", {"event_version": "2026-06-01"}, format="json")
    assert (answer.status_code, answer.json()) == (200, {
        "event_type": "customer.created", "message": published["message_id"],
        "current": {"version": "2026-01-01", "payload": {"name": "Grace Hopper"}},
        "upgraded": {"version": "2026-06-01", "payload": {"full_name": "Grace Hopper"}}})
    upgraded = api.patch(url, {"event_version": "2026-06-01"}, format="json")
    assert (upgraded.status_code, upgraded.json()["event_version"]) == (200, "2026-06-01")
    again = api.post(url + "event-version/preview/", {"event_version": "2026-01-01"}, format="json").json()
    assert (again["current"]["version"], again["upgraded"]["payload"]) == ("2026-06-01", {"name": "Grace Hopper"})


def test_a_failing_down_converter_is_an_answer_with_its_line(api, user):
    versioned(user, down_converter="function handler(webhook) {\n  return webhook.payload.x.y;\n}")
    created = create_subscription(api, create_topic(api)["id"], event_version="2026-01-01")
    api.post(f"/api/topics/{created['topic']}/publish/", {"payload": {"full_name": "Ada"},
                                                          "event_type": "customer.created"}, format="json")
    answer = api.post(f"/api/subscriptions/{created['id']}/event-version/preview/", {"event_version": ""},
                      format="json")
    assert (answer.status_code, answer.json()["current"]) == (200, {
        "version": "2026-01-01", "line": 2,
        "error": "down-converter of 2026-06-01: TypeError: Cannot read properties of undefined (reading 'y')"})


@pytest.mark.parametrize("body, field, reason", [
    ({"event_version": "2030-01-01"}, "event_version",
     "'2030-01-01' is not a version of any event type of the catalog"),
    ({}, "event_version", "This field is required."),
    ({"event_version": "2026-06-01", "version": "x"}, "version", "unknown field; this request takes event_version"),
])
def test_a_preview_that_cannot_be_made_is_a_400_naming_the_field(api, user, body, field, reason):
    versioned(user)
    created = create_subscription(api, create_topic(api)["id"])
    answer = api.post(f"/api/subscriptions/{created['id']}/event-version/preview/", body, format="json")
    assert (answer.status_code, answer.json()) == (400, {field: [reason]})


def test_a_tenant_previews_and_upgrades_its_own_and_no_one_elses(shop, user, other_api):
    versioned(user)
    acme, sub = shop["acme"]["client"], shop["acme"]["subscription"]["id"]
    Subscription.objects.filter(id=sub).update(event_version="2026-01-01")
    url = f"/api/subscriptions/{sub}/"
    shown = acme.post(url + "event-version/preview/", {"event_version": "2026-06-01"}, format="json")
    assert shown.status_code == 200 and shown.json()["current"] == {"version": "2026-01-01",
                                                                     "payload": {"name": "Ada"}}
    assert other_api.post(url + "event-version/preview/", {"event_version": "2026-06-01"},
                          format="json").status_code == 404
    globex = shop["globex"]["client"]
    assert globex.post(url + "event-version/preview/", {"event_version": "2026-06-01"},
                       format="json").status_code == 404
    assert acme.patch(url, {"event_version": "2026-06-01"}, format="json").json()["event_version"] == "2026-06-01"

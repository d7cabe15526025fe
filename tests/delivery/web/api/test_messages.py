"""The messages resource (delivery/web/api/messages.py): a message with its deliveries and whom it was published
for, and its fan-out report, one row per subscription of the topic, filtered by outcome or subscription."""

import pytest

from delivery.events import publish
from delivery.web import fanout_report
from subscriptions.models import Tenant
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_message_detail_shows_per_subscription_status(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    detail = api.get(f"/api/messages/{published['message_id']}/").json()
    assert [(d["subscription"], d["status"]) for d in detail["deliveries"]] == [(subscription["id"], "pending")]
    assert api.get(f"/api/deliveries/?message={published['message_id']}").json()["count"] == 1


def test_a_message_shows_whom_it_was_published_for(shop, admin_client):
    owner = Tenant.objects.get(external_id="acme").owner
    for_acme = publish("orders", {"n": 1}, owner=owner, tenant="acme")
    for_all = publish("orders", {"n": 2}, owner=owner, broadcast=True)
    shown = {m: shop["api"].get(f"/api/messages/{m.id}/").json() for m in (for_acme, for_all)}
    assert (shown[for_acme]["tenant"], shown[for_acme]["broadcast"]) == ("acme", False)
    assert (shown[for_all]["tenant"], shown[for_all]["broadcast"]) == (None, True)
    page = admin_client.get(f"/admin/herald_delivery/message/{for_acme.id}/change/").content.decode()
    assert "Acme" in page and "Broadcast" in page


def test_the_fanout_answers_for_another_tenants_subscription(shop):
    """"Why did Globex not get it?": the message was published for Acme. Every subscription of the topic has a row,
    the other tenants' as `not_addressed`, counted and filtered by the database like every outcome."""
    api, owner = shop["api"], Tenant.objects.get(external_id="acme").owner
    for_acme = publish("orders", {"n": 1}, owner=owner, tenant="acme")
    globex = shop["globex"]["subscription"]["id"]
    answer = api.get(f"/api/messages/{for_acme.id}/fanout/?subscription={globex}").json()
    assert answer["count"] == 1
    row = answer["results"][0]
    assert (row["outcome"], row["tenant"]) == ("not_addressed", "globex")
    assert row["reason"] == "published for tenant 'acme'; this subscription is tenant 'globex''s, which the message " \
                            "was not for"
    assert "tenant='globex'" in row["fix"]
    detail = api.get(f"/api/messages/{for_acme.id}/").json()
    assert detail["fanout_summary"]["not_addressed"] == 1
    assert detail["fanout_summary"]["delivery_created"] == 2  # acme's and the owner's own
    listed = api.get(f"/api/messages/{for_acme.id}/fanout/?outcome=not_addressed").json()
    assert [r["subscription"] for r in listed["results"]] == [globex]
    own_only = publish("orders", {"n": 2}, owner=owner)
    rows = {r["tenant"]: r for r in api.get(f"/api/messages/{own_only.id}/fanout/").json()["results"]}
    assert rows["acme"]["outcome"] == rows["globex"]["outcome"] == "not_addressed"
    assert rows["acme"]["reason"].startswith("published for the owner's own subscriptions only")
    assert rows[None]["outcome"] == "delivery_created"


def test_a_message_is_shown_in_the_same_fields_in_the_list_and_with_its_fanout_in_detail(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"])
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"n": 1}, "subject": "s"},
                         format="json").json()
    listed = api.get("/api/messages/").json()["results"]
    fields = ["id", "topic", "topic_name", "event_type", "subject", "payload", "payload_is_text", "attributes",
              "published_at", "idempotency_key", "ordering_key", "tenant", "tenant_registered", "broadcast",
              "schema_mismatch"]
    assert [list(row) for row in listed] == [fields]
    assert {name: listed[0][name] for name in ("id", "topic", "topic_name", "subject", "payload", "tenant",
                                               "tenant_registered", "broadcast")} == {
        "id": published["message_id"], "topic": topic["id"], "topic_name": "orders", "subject": "s",
        "payload": {"n": 1}, "tenant": None, "tenant_registered": None, "broadcast": False}
    detail = api.get(f"/api/messages/{published['message_id']}/").json()
    assert list(detail) == [*fields, "fanout_summary", "fanout", "deliveries"]
    assert detail["fanout_summary"]["delivery_created"] == 1
    assert [row["outcome"] for row in detail["fanout"]] == ["delivery_created"]


def test_the_fanout_refuses_an_outcome_or_a_subscription_it_cannot_be(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"])
    published = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    url = f"/api/messages/{published['message_id']}/fanout/"
    outcome = api.get(url, {"outcome": "filtred_out"})
    assert outcome.status_code == 400
    assert outcome.json() == {"outcome": [f"Use one of: {', '.join(fanout_report.OUTCOMES)}."]}
    for raw in ("-1", "²", "1" * 19):
        wrong = api.get(url, {"subscription": raw})
        assert (wrong.status_code, wrong.json()) == (400, {"subscription": ["A subscription id (a positive integer)."]})
    page = api.get(url).json()
    assert (page["count"], page["schema_mismatch"]) == (1, "")

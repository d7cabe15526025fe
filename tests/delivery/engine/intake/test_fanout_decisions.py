"""Every fan-out decision is recorded: for each subscription of the topic, the message's page says whether a
delivery was created (and where it stands), or why not — filtered out by which attribute, not confirmed, paused,
subscribed after the publish."""

import pytest
from django.db import connection

from delivery.engine.intake import fanout
from delivery.engine.intake.publishing import message_publish
from delivery.engine.scheduler import dispatch
from delivery.models import Delivery, Message
from delivery.rules.filters.policy import explain
from delivery.web import fanout_report
from subscriptions.models import Endpoint, Subscription, Topic
from tests.conftest import FAST, drain, settle
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def add(api, topic, url, **extra):
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_the_message_page_answers_for_every_subscription(api, receiver, redis_conn, settings):
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    receiver.script = lambda request: Reply(status=503 if "failing" in request.path else 200)
    delivered = add(api, topic, receiver.url + "/ok")
    failing = add(api, topic, receiver.url + "/failing", delivery_policy=FAST)
    filtered = add(api, topic, receiver.url + "/eu", filter_policy={"region": ["eu"], "kind": ["order"]})
    paused = add(api, topic, receiver.url + "/paused")
    assert api.post(f"/api/subscriptions/{paused['id']}/pause/").status_code == 200
    settings.HERALD_REQUIRE_CONFIRMATION = True
    unconfirmed = add(api, topic, receiver.url + "/unconfirmed")
    assert unconfirmed["status"] == "pending_confirmation"

    published = api.post(f"/api/topics/{topic['id']}/publish/",
                         {"payload": {"n": 1}, "attributes": {"region": "us", "kind": "order"}}, format="json")
    assert published.status_code == 202, published.content
    later = add(api, topic, receiver.url + "/later")
    settle(horizon=0.5)

    page = api.get(f"/api/messages/{published.json()['message_id']}/")
    assert page.status_code == 200
    body = page.json()
    by_id = {row["subscription"]: row for row in body["fanout"]}
    assert [row["subscription"] for row in body["fanout"]] == sorted(by_id)
    assert body["fanout_summary"] == {"delivery_created": 2, "paused": 1, "filtered_out": 1, "not_confirmed": 1,
                                      "subscribed_after_publish": 1}

    ok = by_id[delivered["id"]]
    assert ok["outcome"] == "delivery_created" and ok["delivery"]["status"] == "succeeded"
    assert ok["reason"] == "delivered after 1 attempt(s)" and ok["delivery"]["last_error"] is None

    bad = by_id[failing["id"]]
    assert bad["outcome"] == "delivery_created" and bad["delivery"]["status"] == "pending"
    assert bad["delivery"]["next_attempt_at"] is not None
    assert bad["delivery"]["last_error"]["status"] == 503
    assert bad["delivery"]["last_error"]["error_class"] == "http_status"
    assert bad["reason"].startswith("1 attempt(s) failed; next attempt at ")
    assert bad["reason"].endswith(" UTC; last error: HTTP 503")

    out = by_id[filtered["id"]]
    assert out["outcome"] == "filtered_out" and out["delivery"] is None
    assert out["reason"] == """filtered out: attribute 'region' is "us", which meets none of ["eu"]"""

    held = by_id[paused["id"]]
    assert held["outcome"] == "paused" and held["delivery"]["status"] == "pending"
    assert held["reason"] == "paused at publish time; held: the subscription is paused"

    waiting = by_id[unconfirmed["id"]]
    assert waiting["outcome"] == "not_confirmed" and waiting["delivery"] is None
    assert "awaiting confirmation" in waiting["reason"]
    assert waiting["fix"].startswith("resend the confirmation request")
    assert bad["fix"] == "retry now (the delivery's page) once the endpoint is fixed"
    assert ok["fix"] == "" and out["fix"].startswith("none needed")
    assert held["fix"] == "resume the subscription"

    assert by_id[later["id"]]["outcome"] == "subscribed_after_publish"

    # The same answers, paged and filtered, for topics too large to list on one page.
    message_id = published.json()["message_id"]
    only = api.get(f"/api/messages/{message_id}/fanout/", {"outcome": "filtered_out"}).json()
    assert only["count"] == 1 and only["results"][0]["subscription"] == filtered["id"]
    one = api.get(f"/api/messages/{message_id}/fanout/", {"subscription": paused["id"]}).json()
    assert [row["outcome"] for row in one["results"]] == ["paused"]
    # Each outcome is chosen by the database (a page reads a page): the same rows as the whole report's.
    everything = api.get(f"/api/messages/{message_id}/fanout/").json()["results"]
    for outcome in fanout_report.OUTCOMES:
        listed = api.get(f"/api/messages/{message_id}/fanout/", {"outcome": outcome}).json()
        assert listed["results"] == [row for row in everything if row["outcome"] == outcome], outcome
        assert listed["count"] == len(listed["results"])
    # Resuming releases the held delivery; the page still says it was paused when published.
    assert api.post(f"/api/subscriptions/{paused['id']}/resume/").status_code == 200
    dispatch.dispatch_due()
    drain()
    row = api.get(f"/api/messages/{message_id}/fanout/", {"subscription": paused["id"]}).json()["results"][0]
    assert row["delivery"]["status"] == "succeeded" and row["reason"].startswith("paused at publish time; delivered")


def test_bad_fanout_queries_are_400_and_other_owners_404(api, other_api, receiver, redis_conn):
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    add(api, topic, receiver.url)
    message_id = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()["message_id"]
    for query, field in (({"outcome": "lost"}, "outcome"), ({"subscription": "x"}, "subscription"),
                         ({"subscription": "9" * 40}, "subscription")):
        response = api.get(f"/api/messages/{message_id}/fanout/", query)
        assert response.status_code == 400 and field in response.json(), response.content
    assert other_api.get(f"/api/messages/{message_id}/fanout/").status_code == 404
    assert other_api.get(f"/api/messages/{message_id}/").status_code == 404


def test_a_large_fan_out_records_its_decisions_once_per_outcome(user, settings, redis_conn):
    """10,000 subscriptions, each filtering on its own customer: the record is ids grouped by outcome and failing
    attribute (one JSON value on the message), and the job writes only the one matching delivery."""

    settings.HERALD_INLINE_FANOUT = 500
    topic = Topic.objects.create(owner=user, name="customers")
    endpoints = Endpoint.objects.bulk_create(
        [Endpoint(owner=user, url=f"http://127.0.0.1:9/{n}") for n in range(10_000)])
    Subscription.objects.bulk_create([
        Subscription(topic=topic, endpoint=e, status="confirmed", filter_policy={"customer": [f"c{n}"]})
        for n, e in enumerate(endpoints)])
    message, count, _ = message_publish(topic=topic, payload={}, attributes={"customer": "c17"})
    assert count == 1 and not message.fanout_pending
    recorded = Message.objects.get(id=message.id).fanout_skipped
    assert list(recorded) == ["filtered_out"] and len(recorded["filtered_out"]["customer"]) == 9_999
    assert Delivery.objects.filter(message=message).count() == 1


def rows_returned(table: str, call):
    """(rows the database returned for queries of `table` while `call` ran, what `call` returned)."""
    counted = []

    def counting(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if table in sql:
            counted.append(max(context["cursor"].rowcount, 0))
        return result

    with connection.execute_wrapper(counting):
        value = call()
    return sum(counted), value


def test_a_page_of_the_report_reads_a_page(user, api, settings, redis_conn):
    """A topic of 3,000 subscriptions: `?limit=1` reads one subscription's delivery and attempts, not 3,000 (the
    count of the page's total is the database's), and a filter's failing rule, however long, is quoted in at most
    REASON_CHARS."""

    settings.HERALD_INLINE_FANOUT = 5000  # the deliveries exist when the report is read
    topic = Topic.objects.create(owner=user, name="wide")
    endpoints = Endpoint.objects.bulk_create([Endpoint(owner=user, url=f"http://127.0.0.1:9/{n}") for n in range(3000)])
    long_rule = {"customer": [f"c{n:06}" for n in range(20_000)]}  # 200 KB of rule
    Subscription.objects.bulk_create([
        Subscription(topic=topic, endpoint=e, status="confirmed", filter_policy=long_rule if n == 0 else {})
        for n, e in enumerate(endpoints)])
    message, count, _ = message_publish(topic=topic, payload={}, attributes={"customer": "nobody"})
    assert count == 2999 == Delivery.objects.filter(message=message).count()
    for table in (Delivery._meta.db_table, Subscription._meta.db_table):
        returned, page = rows_returned(table, lambda: api.get(f"/api/messages/{message.id}/fanout/",
                                                              {"limit": 1}).json())
        assert returned <= 3, table
    assert page["count"] == 3000 and len(page["results"]) == 1
    [row] = page["results"]
    assert row["outcome"] == "filtered_out" and len(row["reason"]) < fanout_report.REASON_CHARS + 40
    assert row["reason"].endswith("more characters)")
    assert len(api.get(f"/api/messages/{message.id}/").content) < 200_000  # the first page of the report, bounded


def test_decide_records_each_kind_and_the_failing_attribute():
    C = fanout.Candidate
    subscriptions = [C(1, 10, "confirmed"), C(2, 11, "confirmed", {"a": ["x"]}), C(3, 12, "paused"),
                     C(4, 13, "pending_confirmation"), C(5, 14, "confirmed", {"a": ["y"], "b": [1]}),
                     C(6, 15, "confirmed", event_types=["order.*"]),
                     C(7, 16, "confirmed", {"customer": {"tier": ["gold"]}}, "MessageBody"),
                     C(8, 17, "confirmed", {"customer": {"tier": ["silver"]}}, "MessageBody")]
    facts = fanout.Facts({"a": "y", "b": 2}, "invoice.paid", {"customer": {"tier": "gold"}})
    chosen, skipped = fanout.choose(subscriptions, facts)
    assert [c.id for c in chosen] == [1, 3, 7]
    assert skipped == {"filtered_out": {"a": [2], "b": [5], "(event type)": [6], "customer.tier": [8]},
                       "not_confirmed": [4], "paused": [3]}
    assert fanout.choose([C(1, 10, "confirmed")], fanout.Facts({})) == ([C(1, 10, "confirmed")], {})


@pytest.mark.parametrize("policy, attributes, key, text", [
    ({"a": ["x"]}, {}, None, """attribute 'a' is missing; the filter policy requires ["x"]"""),
    ({"n": [{"numeric": [">", 5]}]}, {"n": 3}, None,
     """attribute 'n' is 3, which meets none of [{"numeric": [">", 5]}]"""),
    ({"b": ["y"]}, {"a": 1}, "a",
     "the filter policy's rules for attribute 'a' did not match (the policy has changed since)"),
    ({"a": ["x"]}, {"a": "x"}, None, "the message matches the filter policy"),
])
def test_explain(policy, attributes, key, text):
    assert explain(policy, attributes, key) == text

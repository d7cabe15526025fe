"""Archive and replay: messages kept for their topic's retention are delivered to a subscription again on request
(API and admin), marked as replays, through its filters, its throttle and its ordering."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from delivery.engine.intake import replay
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.scheduler import retention
from delivery.models import Delivery, Message, Replay
from subscriptions.models import Subscription
from tests.conftest import settle
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def setup(api, receiver, **extra):
    topic = api.post("/api/topics/", {"name": "audit", "message_retention_days": 7}, format="json").json()
    assert topic["message_retention_days"] == 7
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url, **extra},
                       format="json")
    assert created.status_code == 201, created.content
    return topic, created.json()


def publish(api, topic, n, **extra):
    response = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"n": n}, **extra}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["message_id"]


def registered(api, external_id: str, name: str) -> APIClient:
    """A tenant registered now, and an API client with a key of its own."""
    tenant = api.post("/api/tenants/", {"external_id": external_id, "name": name}, format="json").json()
    key = api.post(f"/api/tenants/{tenant['id']}/keys/", {"name": "ci"}, format="json").json()["key"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def backdate(message_id, minutes):
    Message.objects.filter(id=message_id).update(published_at=timezone.now() - timedelta(minutes=minutes))


def test_a_window_is_delivered_again_marked_as_a_replay(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver)
    ids = [publish(api, topic, n, attributes={"kind": "a" if n % 2 else "b"}) for n in range(5)]
    settle()
    for n, message_id in enumerate(ids):
        backdate(message_id, 50 - n)  # published 50, 49, 48, 47, 46 minutes ago
    first = len(receiver.requests)
    assert first == 5 and all("herald-replay" not in r.headers for r in receiver.requests)

    since = (timezone.now() - timedelta(minutes=49, seconds=30)).isoformat()
    until = (timezone.now() - timedelta(minutes=46, seconds=30)).isoformat()
    response = api.post(f"/api/subscriptions/{subscription['id']}/replay/",
                        {"since": since, "until": until, "filter_policy": {"kind": ["a", "b"]}}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["messages"] == 3
    settle()
    replayed = receiver.requests[first:]
    assert sorted(r.json()["data"]["n"] for r in replayed) == [1, 2, 3]
    assert {r.headers["herald-replay"] for r in replayed} == {str(body["id"])}
    # the event is the same (CloudEvents id); the Standard Webhooks id differs, so dedupers accept the replay
    assert {r.json()["id"] for r in replayed} == set(ids[1:4])
    assert all(r.headers["webhook-id"] != r.json()["id"] for r in replayed)
    listed = api.get(f"/api/deliveries/?replay={body['id']}").json()
    assert listed["count"] == 3 and {d["status"] for d in listed["results"]} == {"succeeded"}
    # the message's own fan-out answer is about its own delivery, not the replay's
    assert api.get(f"/api/messages/{ids[1]}/").json()["fanout_summary"] == {"delivery_created": 1}

    again = api.post(f"/api/subscriptions/{subscription['id']}/replay/",
                     {"since": since, "until": until, "event_types": ["nothing.*"]}, format="json")
    assert again.status_code == 202 and again.json()["messages"] == 0


def test_a_replay_goes_through_the_subscriptions_filter_and_its_own(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver, filter_policy={"kind": ["a", "b"]})
    for n, kind in enumerate("abcab"):
        publish(api, topic, n, attributes={"kind": kind})
    response = api.post(f"/api/subscriptions/{subscription['id']}/replay/",
                        {"since": (timezone.now() - timedelta(hours=1)).isoformat(),
                         "filter_policy": {"kind": [{"anything-but": "b"}]}}, format="json")
    assert response.json()["messages"] == 2  # a, a (c fails the subscription's own filter; b the replay's)


def test_a_replay_is_throttled_by_the_subscriptions_policy(api, receiver, redis_conn):
    topic, subscription = setup(api, receiver,
                                delivery_policy={"throttlePolicy": {"maxReceivesPerSecond": 5}})
    Subscription.objects.filter(id=subscription["id"]).update(status="paused")
    for n in range(12):
        publish(api, topic, n)
    Subscription.objects.filter(id=subscription["id"]).update(status="confirmed")
    Delivery.objects.all().delete()  # only the replay's deliveries go out
    api.post(f"/api/subscriptions/{subscription['id']}/replay/",
             {"since": (timezone.now() - timedelta(hours=1)).isoformat()}, format="json")
    settle(horizon=3)
    arrivals = sorted(r.at for r in receiver.requests)
    assert len(arrivals) == 12
    for i in range(len(arrivals) - 5):  # never more than 5 in any second
        assert arrivals[i + 5] - arrivals[i] >= 1.0 - 0.05


def test_an_ordered_subscription_replays_in_order(api, receiver, redis_conn):
    receiver.script = lambda request: Reply(status=503 if len(receiver.requests) % 3 == 1 else 200)
    topic, subscription = setup(api, receiver, ordered_delivery=True,
                                delivery_policy={"retrySchedule": {"delays": [0.05], "repeatLast": True},
                                                 "retryLimits": {"maxAttempts": 20}})
    for n in range(6):
        publish(api, topic, n, ordering_key="k")
    settle()
    first = len(receiver.requests)
    created = replay.replay_create(subscription=Subscription.objects.get(id=subscription["id"]),
                                   since=timezone.now() - timedelta(hours=1))
    assert created.messages == 6
    assert Delivery.objects.filter(replay=created, status="pending").count() == 1
    settle()
    ns = [r.json()["data"]["n"] for r in receiver.requests[first:]]
    assert ns == sorted(ns) and sorted(set(ns)) == list(range(6))


@pytest.mark.parametrize("body, field", [
    ({}, "since"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
    ({"since": "2026-01-01T00:00:00Z", "filter_policy": {"a": "x"}}, "filter_policy"),
    ({"since": "2026-01-01T00:00:00Z", "event_types": [""]}, "event_types"),
])
def test_bad_replays_answer_400(api, receiver, body, field):
    _, subscription = setup(api, receiver)
    response = api.post(f"/api/subscriptions/{subscription['id']}/replay/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert not Replay.objects.exists()


def test_a_replays_filters_are_checked_by_the_service_for_python_callers_too(api, receiver):
    _, subscription = setup(api, receiver)
    with pytest.raises(ApplicationError) as refused:
        replay.replay_create(subscription=Subscription.objects.get(id=subscription["id"]),
                             since=timezone.now() - timedelta(hours=1), filter_policy={"a": {"b": ["x"]}})
    assert refused.value.field == "filter_policy" and "does not support nested" in refused.value.message
    assert not Replay.objects.exists()


def test_replays_are_bounded_and_only_for_your_subscriptions(api, other_api, receiver, settings):
    topic, subscription = setup(api, receiver)
    for n in range(3):
        publish(api, topic, n)
    settings.HERALD_MAX_REPLAY_MESSAGES = 2
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    response = api.post(f"/api/subscriptions/{subscription['id']}/replay/", {"since": since}, format="json")
    assert response.status_code == 400 and "narrow since/until" in str(response.json())
    assert not Replay.objects.exists() and Delivery.objects.count() == 3
    assert other_api.post(f"/api/subscriptions/{subscription['id']}/replay/", {"since": since},
                          format="json").status_code == 404


def test_messages_are_kept_for_their_topics_retention(api, receiver, redis_conn, settings):
    settings.HERALD_MESSAGE_RETENTION_DAYS = 30
    short, _ = setup(api, receiver)  # 7 days
    other = api.post("/api/topics/", {"name": "default"}, format="json").json()
    old_short, old_default = publish(api, short, 1), publish(api, other, 2)
    settle()
    for message_id in (old_short, old_default):
        Message.objects.filter(id=message_id).update(published_at=timezone.now() - timedelta(days=10))
    Delivery.objects.update(finished_at=timezone.now() - timedelta(days=10))
    assert retention.purge()["messages"] == 1
    assert list(Message.objects.values_list("id", flat=True)) == [Message.objects.get(id=old_default).id]


def test_a_message_for_a_customer_not_yet_registered_names_it_and_a_replay_after_registration_reaches_it(
        api, receiver, other_receiver, redis_conn):
    orders = api.post("/api/topics/", {"name": "orders", "open_to_tenants": True}, format="json").json()
    own = api.post("/api/subscriptions/", {"topic": orders["id"], "endpoint": receiver.url}, format="json").json()
    early = publish(api, orders, 1, tenant="initech", unknown_tenant="record")
    publish(api, orders, 2, tenant="umbrella", unknown_tenant="record")  # another customer's: never initech's
    settle()
    shown = api.get(f"/api/messages/{early}/").json()
    assert (shown["tenant"], shown["tenant_registered"]) == ("initech", False)
    assert [m["id"] for m in api.get("/api/messages/?tenant=initech").json()["results"]] == [early]
    out = io.StringIO()
    call_command("herald_why", early, stdout=out)
    assert "published 20" in out.getvalue() and "for tenant 'initech', not registered" in out.getvalue()
    assert len(receiver.requests) == 2  # the owner's own subscription had both

    initech = registered(api, "initech", "Initech")
    theirs = initech.post("/api/subscriptions/", {"topic": orders["id"], "endpoint": other_receiver.url},
                          format="json").json()
    later = publish(api, orders, 3, tenant="initech")
    settle()
    assert [request.json()["data"] for request in other_receiver.requests] == [{"n": 3}]

    replayed = initech.post(f"/api/subscriptions/{theirs['id']}/replay/", {"since": "2000-01-01T00:00:00Z"},
                            format="json")
    assert replayed.status_code == 202, replayed.content
    settle()
    assert sorted(request.json()["data"]["n"] for request in other_receiver.requests) == [1, 3, 3]
    assert api.get(f"/api/messages/{later}/").json()["tenant_registered"] is True
    assert own["id"] != theirs["id"]


def test_a_tenant_registered_again_under_a_deleted_ones_external_id_replays_none_of_its_messages(
        api, receiver, other_receiver, redis_conn):
    orders = api.post("/api/topics/", {"name": "orders", "open_to_tenants": True}, format="json").json()
    first = api.post("/api/tenants/", {"external_id": "acme", "name": "Acme"}, format="json").json()
    publish(api, orders, 1, tenant="acme")
    assert api.delete(f"/api/tenants/{first['id']}/").status_code == 204
    acme = registered(api, "acme", "Another Acme")
    theirs = acme.post("/api/subscriptions/", {"topic": orders["id"], "endpoint": other_receiver.url},
                       format="json").json()

    replayed = acme.post(f"/api/subscriptions/{theirs['id']}/replay/", {"since": "2000-01-01T00:00:00Z"},
                         format="json")

    assert replayed.status_code == 202, replayed.content
    settle()
    assert other_receiver.requests == []

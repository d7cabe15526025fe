"""Herald inside a Django project: publishing from code in the caller's transaction, publishing on a model's
save/delete, signals and operational events after commit, the receiver helper against Herald itself, the test
outbox, and the settings' defaults."""

import json
import time

import pytest
from django.contrib.auth.models import Group
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.test import Client, override_settings

import tests.receiver_urls as hooks
from delivery import signals
from delivery.conf import DEFAULTS, from_environment, herald, parse
from delivery.engine.accounts.signing_secrets import subscription_rotate_secret
from delivery.engine.accounts.subscribing import subscription_create
from delivery.engine.plumbing import redis_link
from delivery.engine.state import health
from delivery.events import PublishError, publish, publish_on_save
from delivery.models import Delivery, Message
from delivery.rules import signing
from delivery.testing import capture_events
from subscriptions.models import Endpoint, Subscription, Topic
from tests.conftest import drain, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def orders(user, receiver, redis_conn):
    topic = Topic.objects.create(owner=user, name="orders")
    endpoint = Endpoint.objects.create(owner=user, url=receiver.url)
    Subscription.objects.create(topic=topic, endpoint=endpoint, status="confirmed")
    return topic


def pump_wanted(redis_conn) -> bool:
    return bool(redis_conn.exists("herald:pump-wanted:deliveries"))


def test_a_rolled_back_transaction_publishes_nothing(orders, user, receiver, redis_conn):
    with pytest.raises(RuntimeError), transaction.atomic():
        publish("orders", {"order": 1}, owner=user, event_type="order.created")
        assert Message.objects.count() == 1  # written in the caller's transaction …
        raise RuntimeError("the business write failed")
    assert Message.objects.count() == 0 and Delivery.objects.count() == 0  # … and gone with it
    assert not pump_wanted(redis_conn)
    drain()
    assert receiver.requests == []


def test_a_committed_transaction_publishes_after_its_commit(orders, user, receiver, redis_conn, processes):
    processes.worker()
    with transaction.atomic():
        message = publish("orders", {"order": 2}, owner=user.username, event_type="order.created")
        assert not pump_wanted(redis_conn)  # nothing asked of the workers before the commit
        assert Delivery.objects.get(message=message).status == "pending"
    request = receiver.wait_for(1)[0]
    assert request.json()["data"] == {"order": 2} and request.json()["type"] == "order.created"
    assert request.headers["webhook-id"] == str(message.id)
    wait_until(lambda: Delivery.objects.get(message=message).status == "succeeded")


def test_publish_names_what_is_wrong(user, settings, redis_conn):
    Topic.objects.create(owner=user, name="orders")
    with pytest.raises(PublishError, match="needs its owner"):
        publish("orders", {})
    settings.HERALD_PUBLISH_OWNER = user.username
    assert publish("orders", {"ok": True}).topic.name == "orders"  # the default owner
    with pytest.raises(PublishError, match="has no topic 'invoices'; create it first"):
        publish("invoices", {})
    assert publish("invoices", {}, create=True).topic.owner == user  # created on first use when allowed
    with pytest.raises(PublishError, match="not a valid topic name"):
        publish("has space", {})
    with pytest.raises(PublishError, match="payload is .* bytes; the limit is"):
        publish("orders", "x" * (herald.MAX_PAYLOAD_BYTES + 1))
    with pytest.raises(PublishError, match="payload.n: must be a finite number"):
        publish("orders", {"n": float("nan")})
    with pytest.raises(PublishError, match="an attribute value is a string .* or a list of strings"):
        publish("orders", {}, attributes={"a": {"nested": 1}})
    assert publish("orders", {}, attributes={"a": ["x", 1, True, None]}).attributes == {"a": ["x", 1, True, None]}
    with pytest.raises(PublishError, match="No user 'ghost'"):
        publish("orders", {}, owner="ghost")
    first = publish("orders", {"n": 1}, idempotency_key="k-1")
    assert publish("orders", {"n": 1}, idempotency_key="k-1").id == first.id
    with pytest.raises(PublishError, match="already used with a different request"):
        publish("orders", {"n": 2}, idempotency_key="k-1")
    text = publish("orders", text="plain words")
    assert text.payload == "plain words" and text.payload_is_text


def test_publish_on_save_goes_out_only_with_the_save(orders, user, receiver, redis_conn):
    stop = publish_on_save(Group, "orders", owner=user)
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            Group.objects.create(name="rolled back")
            raise RuntimeError
        assert Message.objects.count() == 0
        group = Group.objects.create(name="buyers")
        group.name = "sellers"
        group.save()
        group_id = group.id
        group.delete()
    finally:
        stop()
    Group.objects.create(name="after disconnect")
    events = list(Message.objects.order_by("published_at").values_list("event_type", "subject", "payload"))
    assert events == [
        ("auth.group.created", f"auth.group:{group_id}", {"id": group_id, "name": "buyers", "permissions": []}),
        ("auth.group.updated", f"auth.group:{group_id}", {"id": group_id, "name": "sellers", "permissions": []}),
        ("auth.group.deleted", f"auth.group:{group_id}", {"id": group_id, "name": "sellers", "permissions": []}),
    ]
    drain()  # the three are sent concurrently: they may arrive in any order
    assert sorted(r.json()["type"] for r in receiver.wait_for(3)) == sorted(e[0] for e in events)


def test_signals_are_sent_after_the_state_is_committed(user, receiver, redis_conn):
    seen = []

    def record(signal_name):
        def handler(sender, **kwargs):
            subject = kwargs.get("delivery") or kwargs.get("endpoint")
            seen.append((signal_name, subject.id, kwargs.get("reason"), kwargs.get("to_state"),
                         connection.in_atomic_block))
        return handler

    handlers = {signals.delivery_succeeded: record("succeeded"), signals.delivery_dead_lettered: record("dead"),
                signals.endpoint_state_changed: record("endpoint")}
    for signal, handler in handlers.items():
        signal.connect(handler)
    try:
        receiver.script = lambda request: Reply(status=410 if request.path.endswith("/gone") else 200)
        topic = Topic.objects.create(owner=user, name="t")
        ok = Endpoint.objects.create(owner=user, url=receiver.url + "/ok")
        gone = Endpoint.objects.create(owner=user, url=receiver.url + "/gone")
        for endpoint in (ok, gone):
            Subscription.objects.create(topic=topic, endpoint=endpoint, status="confirmed")
        message = publish(topic, {"n": 1})
        drain()
    finally:
        for signal, handler in handlers.items():
            signal.disconnect(handler)
    delivered = Delivery.objects.get(message=message, endpoint=ok)
    dead = Delivery.objects.get(message=message, endpoint=gone)
    assert dead.status == "dead_lettered"
    assert ("succeeded", delivered.id, None, None, False) in seen
    assert ("dead", dead.id, dead.dead_letter_reason, None, False) in seen
    assert ("endpoint", gone.id, "the endpoint answered 410 Gone", "frozen", False) in seen
    assert len(seen) == 3  # each once, none inside a transaction


def test_operational_events_reach_the_operators_topic(user, receiver, settings, redis_conn):
    settings.HERALD_OPERATIONAL_EVENTS_TOPIC = "herald-ops"
    settings.HERALD_OPERATIONAL_EVENTS_OWNER = user.username
    receiver.script = lambda request: Reply(status=410 if request.path.endswith("/gone") else 200)
    ops = Topic.objects.create(owner=user, name="herald-ops")
    Subscription.objects.create(topic=ops, endpoint=Endpoint.objects.create(owner=user, url=receiver.url + "/ops"),
                                status="confirmed")
    shop = Topic.objects.create(owner=user, name="shop")
    gone = Endpoint.objects.create(owner=user, url=receiver.url + "/gone")
    Subscription.objects.create(topic=shop, endpoint=gone, status="confirmed", secret=signing.SECRET_PREFIX + "A" * 44)
    publish(shop, {"n": 1})
    drain()
    drain()  # the operational events' own deliveries
    events = {r.json()["type"]: r.json()["data"] for r in receiver.requests if r.path.endswith("/ops")}
    assert set(events) == {"herald.endpoint.frozen", "herald.delivery.dead_lettered"}
    assert events["herald.endpoint.frozen"]["endpoint"]["url"] == gone.url
    assert events["herald.delivery.dead_lettered"]["topic"] == "shop"
    assert events["herald.delivery.dead_lettered"]["last_error"]["response_status"] == 410
    assert "A" * 44 not in json.dumps(events)  # no secret in them

    gone.refresh_from_db()
    health.endpoint_enable(endpoint=gone)
    drain()
    ops_events = [r.json()["type"] for r in receiver.requests if r.path.endswith("/ops")]
    assert ops_events[-1] == "herald.endpoint.recovered"


def test_the_receiver_helper_against_herald_itself(live_server, user, settings, redis_conn):
    """A Django view decorated with @webhook_receiver, served by a live server: Herald's confirmation handshake,
    signed deliveries, a rotation (both secrets), deduplication, refusals."""
    settings.ROOT_URLCONF = "tests.receiver_urls"
    settings.HERALD_REQUIRE_CONFIRMATION = True
    hooks.received.clear()
    topic = Topic.objects.create(owner=user, name="orders")
    subscription, secret = subscription_create(topic=topic, endpoint=f"{live_server.url}/hooks/orders/")
    hooks.secrets[:] = [secret]
    drain()  # the confirmation request: the helper echoes the token
    subscription.refresh_from_db()
    assert subscription.status == "confirmed"
    assert hooks.received == []  # the handshake does not reach the view

    message = publish(topic, {"order": 42}, event_type="order.created", subject="order:42")
    drain()
    assert Delivery.objects.get(message=message).status == "succeeded"
    (event,) = hooks.received
    assert (event.id, event.type, event.subject, event.data) == (str(message.id), "order.created", "order:42",
                                                                 {"order": 42})

    rotated = subscription_rotate_secret(subscription=subscription)
    hooks.secrets[:] = [rotated.secret]  # the receiver knows only the new secret; Herald signs with both
    publish(topic, {"order": 43})
    drain()
    assert hooks.received[-1].data == {"order": 43}

    # Replays of an already handled webhook are answered without calling the view again.
    body = json.dumps({"specversion": "1.0", "id": "m-1", "type": "t", "source": "s", "data": 1}).encode()
    stamp = int(time.time())
    headers = {"HTTP_WEBHOOK_ID": "m-1", "HTTP_WEBHOOK_TIMESTAMP": str(stamp),
               "HTTP_WEBHOOK_SIGNATURE": signing.sign(rotated.secret, "m-1", stamp, body)}
    client = Client()
    count = len(hooks.received)
    first = client.post("/hooks/orders/", body, content_type="application/cloudevents+json", **headers)
    again = client.post("/hooks/orders/", body, content_type="application/cloudevents+json", **headers)
    assert first.status_code == 204 and again.status_code == 204 and again.headers["herald-duplicate"] == "1"
    assert len(hooks.received) == count + 1
    forged = client.post("/hooks/orders/", body, content_type="application/cloudevents+json",
                         **{**headers, "HTTP_WEBHOOK_ID": "m-2"})
    assert forged.status_code == 401 and "no signature matches" in forged.json()["error"]
    assert client.get("/hooks/orders/").status_code == 405

    # A raw delivery carries the event in ce-* headers.
    raw, raw_secret = subscription_create(topic=topic, endpoint=f"{live_server.url}/hooks/orders/?raw=1",
                                          raw_message_delivery=True)
    hooks.secrets[:] = [raw_secret]
    Subscription.objects.filter(id=raw.id).update(status="confirmed")
    Subscription.objects.filter(id=subscription.id).update(status="paused")
    publish(topic, {"order": 44}, event_type="order.paid")
    drain()
    assert (hooks.received[-1].type, hooks.received[-1].data) == ("order.paid", {"order": 44})

    # A CloudEvents batch: the view is called once per event, in order.
    batched, batch_secret = subscription_create(topic=topic, endpoint=f"{live_server.url}/hooks/orders/?batch=1",
                                                max_events_per_batch=5)
    hooks.secrets[:] = [batch_secret]
    Subscription.objects.filter(id=batched.id).update(status="confirmed")
    Subscription.objects.filter(id=raw.id).update(status="paused")
    messages = [publish(topic, {"order": n}) for n in (45, 46, 47)]
    count = len(hooks.received)
    drain()
    assert [event.data for event in hooks.received[count:]] == [{"order": 45}, {"order": 46}, {"order": 47}]
    assert {Delivery.objects.get(message=m, subscription=batched).status for m in messages} == {"succeeded"}


def test_the_outbox_captures_events_without_workers_or_redis(orders, user, redis_conn):
    with capture_events() as outbox:
        with transaction.atomic():
            publish("orders", {"order": 7}, owner=user, event_type="order.created", attributes={"region": "eu"})
        publish("orders", text="hello", owner=user, event_type="note")
    assert [(e.topic, e.event_type, e.payload, e.attributes, e.deliveries) for e in outbox] == [
        ("orders", "order.created", {"order": 7}, {"region": "eu"}, 1), ("orders", "note", "hello", {}, 1)]
    assert [e.event_type for e in outbox.of_type("note")] == ["note"]
    assert not pump_wanted(redis_conn) and redis_link.queue("deliveries").count == 0
    publish("orders", {}, owner=user)  # capturing ended: publishing asks for a pump again
    assert pump_wanted(redis_conn)


def test_the_outbox_fixture(herald_outbox, orders, user):
    publish("orders", {"n": 1}, owner=user, event_type="x.y")
    assert [e.event_type for e in herald_outbox] == ["x.y"]


def test_settings_have_defaults_and_read_the_environment(settings):
    assert herald.INLINE_FANOUT == DEFAULTS["INLINE_FANOUT"]
    settings.HERALD_INLINE_FANOUT = 7
    assert herald.INLINE_FANOUT == 7  # kept once read, forgotten when a setting changes
    with override_settings(HERALD_INLINE_FANOUT=9):
        assert herald.INLINE_FANOUT == 9
    assert herald.INLINE_FANOUT == 7
    with pytest.raises(AttributeError):
        herald.NO_SUCH_SETTING  # noqa: B018
    assert from_environment({"HERALD_REQUIRE_CONFIRMATION": "off", "HERALD_MAX_IN_FLIGHT": "64",
                             "HERALD_PUMP_SECONDS": "2.5", "HERALD_ALLOWED_NETWORKS": "10.0.0.0/8, ::1/128",
                             "RQ_LOG_LEVEL": "INFO", "HERALD_PUBLIC_URL": "", "UNRELATED": "1"}) == {
        "HERALD_REQUIRE_CONFIRMATION": False, "HERALD_MAX_IN_FLIGHT": 64, "HERALD_PUMP_SECONDS": 2.5,
        "HERALD_ALLOWED_NETWORKS": ["10.0.0.0/8", "::1/128"], "HERALD_RQ_LOG_LEVEL": "INFO"}
    with pytest.raises(ImproperlyConfigured, match="HERALD_MAX_IN_FLIGHT must be a number"):
        parse("MAX_IN_FLIGHT", "many")
    with pytest.raises(ImproperlyConfigured, match="must be true or false"):
        parse("REQUIRE_CONFIRMATION", "maybe")


def test_a_deployment_without_a_public_url_is_warned(settings):
    settings.DEBUG = False
    del settings.HERALD_PUBLIC_URL
    assert [message.id for message in run_checks() if message.id.startswith("herald.")] == ["herald.W001"]
    settings.HERALD_PUBLIC_URL = "https://webhooks.shop.example"
    assert not [message for message in run_checks() if message.id.startswith("herald.")]
    del settings.HERALD_PUBLIC_URL
    settings.DEBUG = True  # a local run: the default is right
    assert not [message for message in run_checks() if message.id.startswith("herald.")]
    for broken in ("shop.example", "ftp://shop.example", "https://"):
        settings.HERALD_PUBLIC_URL = broken
        assert [message.id for message in run_checks() if message.id.startswith("herald.")] == ["herald.E002"]


def test_a_worker_class_that_does_not_import_is_an_error(settings):
    settings.RQ = {**settings.RQ, "WORKER_CLASS": "delivery.engine.worker.HeraldWorker"}  # before the wings
    found = [message for message in run_checks() if message.id == "herald.E001"]
    assert len(found) == 1 and "delivery.engine.sending.worker.HeraldWorker" in found[0].hint
    settings.RQ = {**settings.RQ, "WORKER_CLASS": "delivery.engine.sending.worker.HeraldWorker"}
    assert not [message for message in run_checks() if message.id == "herald.E001"]

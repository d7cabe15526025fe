"""POST /api/topics/{id}/publish-batch/ and `message_publish_batch`: up to 100 messages per request, each entry
validated and answered on its own, idempotency per entry, one pump for the lot."""

import django_rq
import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from delivery.engine.intake import fanout
from delivery.engine.intake.publishing import Entry, message_publish, message_publish_batch
from delivery.models import Delivery, Message
from delivery.web.api.throttling import PublishRateThrottle
from subscriptions.models import Topic
from tests.conftest import subscribe

pytestmark = pytest.mark.django_db(transaction=True)


def batch(api, topic, entries):
    return api.post(f"/api/topics/{topic['id']}/publish-batch/", {"entries": entries}, format="json")


def test_valid_entries_are_published_and_each_bad_one_is_answered_alone(api, receiver, run_worker, settings):
    settings.HERALD_MAX_PAYLOAD_BYTES = 1000
    topic, _ = subscribe(api, receiver)
    response = batch(api, topic, [
        {"id": "a", "payload": {"n": 1}},
        {"id": "b", "message": "plain text", "event_type": "order.created", "attributes": {"region": "eu"}},
        {"id": "c"},  # neither payload nor message
        {"id": "d", "payload": "x" * 2000},  # over the payload limit
        {"id": "e", "payload": {"n": 5}, "attributes": {"bad": {"nested": 1}}},
    ])

    assert response.status_code == 200, response.content
    body = response.json()
    assert [(s["id"], s["deliveries"], s["duplicate"]) for s in body["successful"]] == [
        ("a", 1, False), ("b", 1, False)]
    failed = {f["id"]: f for f in body["failed"]}
    assert (failed["c"]["status"], list(failed["c"]["errors"])) == (400, ["payload"])
    assert failed["d"]["status"] == 413 and "limit" in str(failed["d"]["errors"])
    assert failed["e"]["status"] == 400 and "attributes" in failed["e"]["errors"]
    assert Message.objects.count() == 2 and Delivery.objects.count() == 2
    assert django_rq.get_queue("deliveries").count == 1  # one pump for the whole batch

    run_worker()

    received = receiver.wait_for(2)
    assert sorted(r.headers["webhook-id"] for r in received) == sorted(s["message_id"] for s in body["successful"])
    text = next(r for r in received if r.json()["type"] == "order.created")
    assert text.json()["data"] == "plain text"


def test_a_malformed_batch_is_refused_whole(api, receiver):
    topic, _ = subscribe(api, receiver)
    repeated = batch(api, topic, [{"id": "x", "payload": 1}, {"id": "x", "payload": 2}])
    assert repeated.status_code == 400 and "repeated: x" in repeated.json()["entries"][0]
    too_many = batch(api, topic, [{"id": str(n), "payload": n} for n in range(101)])
    assert too_many.status_code == 400 and "entries" in too_many.json()
    empty = batch(api, topic, [])
    assert empty.status_code == 400 and "entries" in empty.json()
    assert Message.objects.count() == 0


def test_idempotency_keys_apply_per_entry(api, receiver):
    topic, _ = subscribe(api, receiver)
    entries = [{"id": "1", "payload": 1, "idempotency_key": "k-1"}, {"id": "2", "payload": 2}]
    first = batch(api, topic, entries).json()
    again = batch(api, topic, entries).json()

    assert [s["duplicate"] for s in first["successful"]] == [False, False]
    assert [s["duplicate"] for s in again["successful"]] == [True, False]  # the keyed one is the same message
    assert again["successful"][0]["message_id"] == first["successful"][0]["message_id"]
    assert Message.objects.count() == 3


def test_another_owners_topic_is_not_found(api, other_api, receiver):
    topic, _ = subscribe(api, receiver)
    assert batch(other_api, topic, [{"id": "a", "payload": 1}]).status_code == 404
    assert Message.objects.count() == 0


def test_the_python_api_publishes_in_order_with_filters_applied(api, receiver):
    topic, _ = subscribe(api, receiver, filter_policy={"region": ["eu"]})
    results = message_publish_batch(topic=Topic.objects.get(id=topic["id"]), entries=[
        Entry(payload=1, attributes={"region": "eu"}), Entry(payload=2, attributes={"region": "us"}),
        Entry(payload=3, attributes={"region": "eu"}, idempotency_key="once")])

    assert [(message.payload, count, created) for message, count, created in results] == [
        (1, 1, True), (2, 0, True), (3, 1, True)]
    assert sorted(Delivery.objects.values_list("message__payload", flat=True)) == [1, 3]


def test_a_batch_counts_its_entries_against_the_publish_rate(api, receiver, monkeypatch):
    monkeypatch.setattr(PublishRateThrottle, "rate", "5/min")
    topic, _ = subscribe(api, receiver)
    assert batch(api, topic, [{"id": str(n), "payload": n} for n in range(4)]).status_code == 200
    limited = batch(api, topic, [{"id": str(n), "payload": n} for n in range(2)])
    assert limited.status_code == 429 and int(limited["Retry-After"]) > 0
    assert Message.objects.count() == 4


def test_a_batch_whose_every_entry_is_refused_answers_each_and_publishes_nothing(api, receiver):
    topic, _ = subscribe(api, receiver)
    response = batch(api, topic, [{"id": "a"}, {"id": "b", "payload": 1, "attributes": {"x": {"y": 1}}}])
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["successful"] == [] and [f["id"] for f in body["failed"]] == ["a", "b"]
    assert Message.objects.count() == 0
    assert message_publish_batch(topic=Topic.objects.get(), entries=[]) == []


def test_a_publish_outside_a_transaction_writes_in_one_statement_and_inside_one_within_it(api, receiver):
    """The REST publish: its message and deliveries are one statement, without BEGIN and COMMIT. Published inside
    the caller's transaction, the write is a savepoint of it and goes with it: a rollback leaves nothing."""
    topic, _ = subscribe(api, receiver)
    with CaptureQueriesContext(connection) as statements:
        answer = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"n": 1}}, format="json")
    assert answer.status_code == 202, answer.content
    written = [q["sql"].split()[0] for q in statements.captured_queries if q["sql"].split()[0] != "SELECT"]
    assert written == ["WITH"], written
    assert Message.objects.count() == 1 and Delivery.objects.filter(message_id=answer.json()["message_id"]).count() == 1

    model = Topic.objects.get(pk=topic["id"])
    with pytest.raises(RuntimeError), transaction.atomic():
        message_publish(topic=model, payload={"n": 2})
        assert Message.objects.count() == 2
        raise RuntimeError("the caller's transaction rolls back")
    assert Message.objects.count() == 1 and Delivery.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ordered", [False, True])  # one statement; a transaction of the write's own
def test_a_subscription_deleted_while_publishing_is_published_around_not_a_500(api, receiver, monkeypatch, ordered):
    """A tenant removes its endpoint between the publish's read of the topic's subscriptions and its insert: the
    insert's foreign key fails, nothing is written, and the publish is made again without that subscription."""
    topic, gone = subscribe(api, receiver, name="racing")
    kept = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/2"},
                    format="json").json()
    read = fanout.topic_subscriptions
    raced = []

    def read_then_delete(*args, **kwargs):
        found = read(*args, **kwargs)
        if not raced:  # another connection's delete lands right after the first read, and commits
            raced.append(True)
            db = connection.settings_dict
            with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"],
                                 autocommit=True) as other:
                other.execute("DELETE FROM herald_subscriptions_subscription WHERE id = %s", [gone["id"]])
        return found

    monkeypatch.setattr(fanout, "topic_subscriptions", read_then_delete)
    message_publish(topic=Topic.objects.get(id=topic["id"]), payload=1, ordering_key="k" if ordered else None)

    assert list(Delivery.objects.values_list("subscription_id", flat=True)) == [kept["id"]]
    assert Message.objects.count() == 1

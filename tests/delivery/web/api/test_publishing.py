"""Publishing through the API (delivery/web/api/publishing.py): 202 with the message id and how many deliveries were
made, the fan-out to confirmed matching subscriptions, the body's shape (400 naming the field, 413 over the size
limit), the Idempotency-Key header, and a batch whose entries are published or refused one by one."""

import pytest

from delivery.models import Delivery, Message
from subscriptions.models import Subscription
from tests.conftest import subscribe
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_publish_answers_202_with_message_id_and_delivery_count(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/a")
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/b")
    response = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": {"a": 1}, "attributes": {"k": "v"}},
                        format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["deliveries"] == 2 and body["duplicate"] is False
    message = Message.objects.get(id=body["message_id"])
    assert message.payload == {"a": 1} and message.attributes == {"k": "v"}
    assert Delivery.objects.filter(message=message, status="pending").count() == 2


def test_publish_validation(api):
    topic = create_topic(api)
    url = f"/api/topics/{topic['id']}/publish/"
    neither = api.post(url, {"subject": "x"}, format="json")
    assert neither.status_code == 400 and "payload" in neither.json()
    both = api.post(url, {"payload": 1, "message": "x"}, format="json")
    assert both.status_code == 400
    bad_attrs = api.post(url, {"payload": 1, "attributes": {"k": {"nested": 1}}}, format="json")
    assert bad_attrs.status_code == 400 and "attributes" in bad_attrs.json()
    malformed = api.generic("POST", url, '{"payload": ', content_type="application/json")
    assert malformed.status_code == 400 and "JSON" in malformed.json()["detail"]
    assert Message.objects.count() == 0


def test_publish_over_the_size_limit_answers_413(api, settings):
    settings.HERALD_MAX_PAYLOAD_BYTES = 1000
    topic = create_topic(api)
    url = f"/api/topics/{topic['id']}/publish/"
    assert api.post(url, {"message": "x" * 1000}, format="json").status_code == 202
    response = api.post(url, {"message": "x" * 1001}, format="json")
    assert response.status_code == 413 and "1001 bytes" in response.json()["detail"]
    assert Message.objects.count() == 1


def test_only_confirmed_matching_subscriptions_get_deliveries(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/all")
    create_subscription(api, topic["id"], url="http://127.0.0.1:9/eu", filter_policy={"region": ["eu"]})
    pending = create_subscription(api, topic["id"], url="http://127.0.0.1:9/pending")
    # never confirmed (a confirmed_at would make it one awaiting a changed endpoint's consent: held, not skipped)
    Subscription.objects.filter(id=pending["id"]).update(status="pending_confirmation", confirmed_at=None)
    url = f"/api/topics/{topic['id']}/publish/"
    assert api.post(url, {"payload": 1, "attributes": {"region": "us"}}, format="json").json()["deliveries"] == 1
    assert api.post(url, {"payload": 1, "attributes": {"region": "eu"}}, format="json").json()["deliveries"] == 2


def test_the_answer_has_three_fields_and_a_topic_is_named_by_id_or_name(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"])
    by_id = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()
    by_name = api.post("/api/topics/orders/publish/", {"payload": 2}, format="json").json()
    assert list(by_id) == list(by_name) == ["message_id", "deliveries", "duplicate"]
    assert {str(m.id): m.payload for m in Message.objects.all()} == {by_id["message_id"]: 1, by_name["message_id"]: 2}
    missing = api.post("/api/topics/nope/publish/", {"payload": 3}, format="json")
    assert (missing.status_code, missing.json()) == (404, {"detail": "You have no topic with the id or name 'nope'."})


def test_an_idempotency_key_over_255_characters_is_refused_naming_the_header(api):
    topic = create_topic(api)
    url = f"/api/topics/{topic['id']}/publish/"
    refused = api.post(url, {"payload": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 256)
    assert (refused.status_code, refused.json()) == (400, {"Idempotency-Key": ["At most 255 characters."]})
    assert api.post(url, {"payload": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 255).status_code == 202
    assert Message.objects.get().idempotency_key == "k" * 255


def test_a_request_far_over_the_payload_limit_is_refused_before_it_is_read(api, settings):
    settings.HERALD_MAX_PAYLOAD_BYTES = 1000
    topic = create_topic(api)
    refused = api.post(f"/api/topics/{topic['id']}/publish/", {"message": "x" * (2 * 1000 + 65536)}, format="json")
    assert (refused.status_code, refused.json()) == (413, {
        "detail": "The request is larger than 1000 bytes of payload allow."})
    assert Message.objects.count() == 0


@pytest.mark.parametrize("entries,error", [
    ([], "Ensure this field has at least 1 elements."),
    ([{"id": str(n), "payload": n} for n in range(101)], "Ensure this field has no more than 100 elements."),
    ([{"id": "a", "payload": 1}, {"id": "", "payload": 2}],
     "entries[1].id is required: each entry needs an id (a non-empty string, unique in the batch) that the answer "
     "names it by"),
    ([{"id": "b", "payload": 1}, {"id": "a", "payload": 2}, {"id": "b", "payload": 3}, {"id": "a", "payload": 4}],
     "Entry ids must be distinct in a batch; repeated: a, b"),
])
def test_a_batch_that_cannot_be_read_as_a_whole_is_refused_whole(api, entries, error):
    topic = create_topic(api)
    refused = api.post(f"/api/topics/{topic['id']}/publish-batch/", {"entries": entries}, format="json")
    assert (refused.status_code, refused.json()) == (400, {"entries": [error]})
    assert Message.objects.count() == 0


def test_a_batch_answers_each_entry_in_the_order_sent(api):
    topic = create_topic(api)
    create_subscription(api, topic["id"])
    answer = api.post(f"/api/topics/{topic['id']}/publish-batch/", {"entries": [
        {"id": "bad", "payload": 1, "attributes": {"k": {"nested": 1}}},
        {"id": "good", "payload": 2},
        {"id": "typo", "payload": 3, "subjct": "x"}]}, format="json").json()
    assert list(answer) == ["successful", "failed"]
    good = Message.objects.get()
    assert answer["successful"] == [{"id": "good", "message_id": str(good.id), "deliveries": 1, "duplicate": False}]
    assert [(f["id"], f["status"], list(f["errors"])) for f in answer["failed"]] == [
        ("bad", 400, ["attributes"]), ("typo", 400, ["subjct"])]


@pytest.mark.django_db(transaction=True)
def test_publish_batch_fails_entries_one_by_one(api, receiver):
    topic, _ = subscribe(api, receiver)
    url = f"/api/topics/{topic['id']}/publish-batch/"
    answer = api.post(url, {"entries": [
        {"id": "a", "payload": 1, "idempotency_key": "k"},
        {"id": "b", "payload": 2, "idempotency_key": "k"},  # the same key with another request
        {"id": "c", "payload": 3, "idempotency_key": "k"},
        {"id": "d", "payload": 1, "idempotency_key": "k"},  # the same request again: its message, a duplicate
        {"id": "e", "payload": 5}]}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert [(s["id"], s["duplicate"]) for s in body["successful"]] == [("a", False), ("d", True), ("e", False)]
    assert [(f["id"], f["status"]) for f in body["failed"]] == [("b", 409), ("c", 409)]
    assert "already used with a different request" in body["failed"][0]["errors"]["detail"]
    assert Message.objects.count() == 2

    missing = api.post(url, {"entries": [{"id": "x", "payload": 1}, {"payload": 2}]}, format="json")
    assert missing.status_code == 400
    assert missing.json()["entries"] == ["entries[1].id is required: each entry needs an id (a non-empty string, "
                                         "unique in the batch) that the answer names it by"]
    assert Message.objects.count() == 2  # nothing of that batch was published

"""The filters of the messages and deliveries lists (delivery/web/api/filters.py): time bounds in any offset, read as
UTC, with `after` inclusive and `before` exclusive; a time with no UTC equivalent a clear 400; a message found by
the tenant it was published for, registered or not; deliveries by replay; related objects among the requester's
own only."""

from datetime import UTC, datetime, timedelta

import pytest
from django import forms

from delivery.engine.intake import replay
from delivery.events import publish
from delivery.models import Delivery, Message
from delivery.web.api.filters import UTCDateTimeField
from subscriptions.models import Subscription
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_a_time_in_any_offset_python_reads_is_cleaned_to_utc():
    field = UTCDateTimeField()
    assert field.clean("2026-03-02T11:59:00+23:59") == AT
    assert field.clean("2026-02-28T12:01:00-23:59") == AT
    assert field.clean("2026-03-01T12:00:00Z") == AT and field.clean("2026-03-01T12:00:00Z").tzinfo is UTC
    assert UTCDateTimeField(required=False).clean("") is None
    with pytest.raises(forms.ValidationError) as refused:
        field.clean("0001-01-01T00:30:00+01:00")
    assert refused.value.messages == ["This time is outside the supported range."]


def test_published_after_is_inclusive_and_before_exclusive(api):
    topic = create_topic(api)
    for minutes in (0, 1, 2):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": minutes}, format="json")
    Message.objects.filter(payload=1).update(published_at=AT)
    Message.objects.filter(payload=0).update(published_at=AT - timedelta(microseconds=1))
    Message.objects.filter(payload=2).update(published_at=AT + timedelta(minutes=1))

    def payloads(**bounds):
        return sorted(row["payload"] for row in api.get("/api/messages/", bounds).json()["results"])

    assert payloads(published_after="2026-03-01T13:00:00+01:00") == [1, 2]
    assert payloads(published_before="2026-03-01T12:00:00Z") == [0]
    assert payloads(published_after="2026-03-01T12:00:00Z", published_before="2026-03-01T12:01:00Z") == [1]
    refused = api.get("/api/messages/", {"published_after": "0001-01-01T00:30:00+01:00"})
    assert (refused.status_code, refused.json()) == (400, {
        "published_after": ["This time is outside the supported range."]})


def test_a_message_is_found_by_its_tenant_registered_or_not(shop, user):
    for_acme = publish("orders", {"n": 1}, owner=user, tenant="acme")
    for_initech = publish("orders", {"n": 2}, owner=user, tenant="initech", unknown_tenant="record")
    publish("orders", {"n": 3}, owner=user)
    api = shop["api"]
    assert [row["id"] for row in api.get("/api/messages/", {"tenant": "acme"}).json()["results"]] == [str(for_acme.id)]
    assert [row["id"] for row in api.get("/api/messages/", {"tenant": "initech"}).json()["results"]] == [
        str(for_initech.id)]
    assert api.get("/api/messages/", {"tenant": "globex"}).json()["count"] == 0


def test_deliveries_are_found_by_their_replay_and_creation_time(api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    for n in range(2):
        api.post(f"/api/topics/{topic['id']}/publish/", {"payload": n}, format="json")
    replayed = replay.replay_create(subscription=Subscription.objects.get(id=subscription["id"]),
                                    since=datetime.now(UTC) - timedelta(hours=1))
    made = set(Delivery.objects.filter(replay=replayed).values_list("id", flat=True))
    assert len(made) == 2 and Delivery.objects.count() == 4
    listed = api.get("/api/deliveries/", {"replay": replayed.id}).json()["results"]
    assert {row["id"] for row in listed} == made and {row["replay"] for row in listed} == {replayed.id}
    Delivery.objects.filter(id__in=made).update(created_at=AT)
    Delivery.objects.exclude(id__in=made).update(created_at=AT - timedelta(microseconds=1))
    after = api.get("/api/deliveries/", {"created_after": "2026-03-01T12:00:00Z"}).json()["results"]
    before = api.get("/api/deliveries/", {"created_before": "2026-03-01T13:00:00+01:00"}).json()["results"]
    assert {row["id"] for row in after} == made and len(before) == 2 and not made & {row["id"] for row in before}


def test_a_related_object_of_another_owner_is_refused_as_one_that_does_not_exist(api, other_api):
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    mine = api.get("/api/deliveries/", {"subscription": subscription["id"]})
    assert mine.status_code == 200
    theirs = other_api.get("/api/deliveries/", {"subscription": subscription["id"]})
    missing = other_api.get("/api/deliveries/", {"subscription": 999999})
    assert theirs.status_code == missing.status_code == 400
    assert theirs.json() == {"subscription": [
        "Select a valid choice. That choice is not one of the available choices."]} == missing.json()
    assert other_api.get("/api/messages/", {"topic": topic["id"]}).json() == {"topic": [
        "Select a valid choice. That choice is not one of the available choices."]}

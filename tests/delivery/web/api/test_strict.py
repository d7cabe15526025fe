"""Strict input (delivery/web/api/strict.py): a body's unknown fields are 400s naming them and the fields the request
takes, never silently ignored, nothing of the request applied; an action that takes no body refuses one; a query
parameter a route does not take is a 400 naming what it takes."""

import pytest

from delivery.events import publish
from delivery.models import Message
from subscriptions.models import Subscription, Topic
from tests.conftest import subscribe

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC_FIELDS = "delivery_policy, description, message_retention_days, name, open_to_tenants"


@pytest.mark.parametrize("route,body", [
    ("/api/subscriptions/", {"ordered": True}),
    ("/api/subscriptions/", {"filter_polcy": {"region": ["eu"]}}),
    ("/api/topics/", {"nmae": "orders"}),
])
def test_unknown_fields_are_named_and_nothing_is_written(api, receiver, route, body):
    topic = api.post("/api/topics/", {"name": "base"}, format="json").json()
    sent = {"topic": topic["id"], "endpoint": receiver.url, **body} if "subscriptions" in route else {
        "name": "other", **body}
    answer = api.post(route, sent, format="json")
    unknown = next(iter(body))
    assert answer.status_code == 400 and unknown in answer.json(), answer.content
    assert "unknown field; this request takes" in answer.json()[unknown][0]
    assert Subscription.objects.count() == 0 and Topic.objects.count() == 1


def test_unknown_fields_on_updates_publish_and_actions(api, receiver):
    topic, subscription = subscribe(api, receiver)
    url = f"/api/subscriptions/{subscription['id']}/"
    typo = api.patch(url, {"ordered_delivery": True, "max_events_per_bach": 10}, format="json")
    assert typo.status_code == 400 and list(typo.json()) == ["max_events_per_bach"]
    assert api.get(url).json()["ordered_delivery"] is False  # nothing of the request was applied
    assert api.patch(url, {"id": 5, "status": "confirmed"}, format="json").status_code == 200  # read-only: known
    publish_url = f"/api/topics/{topic['id']}/publish/"
    assert list(api.post(publish_url, {"payload": 1, "atributes": {}}, format="json").json()) == ["atributes"]
    assert list(api.post(url + "replay/", {"since": "2026-01-01T00:00:00Z", "unitl": "x"}, format="json").json()
                ) == ["unitl"]
    assert Message.objects.count() == 0
    with pytest.raises(TypeError):
        publish(Topic.objects.get(id=topic["id"]), 1, atributes={})  # the Python API: an unknown keyword


def test_the_answer_names_every_unknown_field_and_the_writable_ones_in_order(api):
    answer = api.post("/api/topics/", {"name": "t", "zeta": 1, "alpha": 2, "csrfmiddlewaretoken": "x"},
                      format="json")
    assert answer.status_code == 400
    assert answer.json() == {"alpha": [f"unknown field; this request takes {TOPIC_FIELDS}"],
                             "zeta": [f"unknown field; this request takes {TOPIC_FIELDS}"]}
    assert not Topic.objects.exists()
    only_the_form_token = api.post("/api/topics/", {"name": "t", "csrfmiddlewaretoken": "x"}, format="json")
    assert only_the_form_token.status_code == 201  # what the browsable API's forms send along is not unknown


def test_at_most_twenty_unknown_fields_are_named_each_cut_to_a_hundred_characters(api):
    body = {"name": "t", **{f"{n:02d}" + "x" * 200: n for n in range(30)}}
    named = list(api.post("/api/topics/", body, format="json").json())
    assert named == [f"{n:02d}" + "x" * 98 for n in range(20)]


def test_actions_that_take_no_body_refuse_fields(api, receiver):
    _, subscription = subscribe(api, receiver)
    answer = api.post(f"/api/subscriptions/{subscription['id']}/pause/", {"reason": "x"}, format="json")
    assert answer.status_code == 400 and "takes no body" in answer.json()["reason"][0]
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"
    assert api.post(f"/api/subscriptions/{subscription['id']}/pause/").status_code == 200


def test_an_action_that_takes_no_body_refuses_one_that_is_not_an_object(api, receiver):
    _, subscription = subscribe(api, receiver)
    answer = api.post(f"/api/subscriptions/{subscription['id']}/pause/", [1, 2], format="json")
    assert (answer.status_code, answer.json()) == (400, {"(body)": ["unknown field; this request takes no body"]})
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"


def test_a_query_parameter_a_route_does_not_take_is_named_with_those_it_takes(api):
    topic = api.post("/api/topics/", {"name": "orders"}, format="json").json()
    listed = api.get("/api/topics/", {"nmae": "orders", "limit": 5})
    assert (listed.status_code, listed.json()) == (400, {"nmae": [
        "is not a parameter of this list; it takes format, limit, name, offset, ordering"]})
    detail = api.get(f"/api/topics/{topic['id']}/", {"name": "orders"})
    assert (detail.status_code, detail.json()) == (400, {"name": [
        "is not a parameter of this request; it takes format"]})
    metrics = api.get(f"/api/topics/{topic['id']}/metrics/", {"windw": "1h"})
    assert metrics.json() == {"windw": ["is not a parameter of this request; it takes format, window"]}
    assert api.get("/api/topics/", {"name": "orders", "csrfmiddlewaretoken": "x"}).json()["count"] == 1

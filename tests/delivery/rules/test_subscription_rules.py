"""What a subscription must be (delivery/rules/subscription_rules.py), whoever changes it: pure cases here, and the
same refusal through the Python services (the API's and the admin's are in tests/subscriptions and test_admin)."""

import pytest

from delivery.engine.accounts.subscribing import subscription_create, subscription_update, topic_create
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules.subscription_rules import (
    OAUTH_AUTHORIZATION,
    OAUTH_TOGETHER,
    RAW_AND_BATCHES,
    TRANSFORMATION_AND_BATCHES,
    TRANSFORMATION_SHAPE,
    code_problem,
    problems,
    transformation_problem,
    transformation_stored,
)

OAUTH = {"oauth_token_url": "https://auth.example/token", "oauth_client_id": "id", "oauth_client_secret": "s"}


def test_raw_delivery_and_batches_do_not_mix_whichever_changes():
    assert problems({}, {"raw_message_delivery": True, "max_events_per_batch": 5}) == {
        "max_events_per_batch": RAW_AND_BATCHES}
    assert problems({"max_events_per_batch": 5}, {"raw_message_delivery": True}) == {
        "max_events_per_batch": RAW_AND_BATCHES}
    assert problems({"raw_message_delivery": True}, {"max_events_per_batch": 1}) == {}
    assert problems({"raw_message_delivery": True, "max_events_per_batch": 5}, {"max_events_per_batch": 1}) == {}


HANDLER = "function handler(webhook) { return webhook; }"


def test_a_transformation_and_batches_do_not_mix_whichever_changes():
    transformation = {"code": HANDLER, "enabled": True}
    assert problems({"max_events_per_batch": 5}, {"transformation": transformation}) == {
        "transformation": TRANSFORMATION_AND_BATCHES}
    assert problems({"transformation": transformation}, {"max_events_per_batch": 5}) == {
        "max_events_per_batch": TRANSFORMATION_AND_BATCHES}
    assert "CloudEvents batches" in TRANSFORMATION_AND_BATCHES
    assert problems({"transformation": transformation}, {"max_events_per_batch": 1}) == {}
    assert problems({"transformation": transformation, "max_events_per_batch": 5}, {"transformation": None}) == {}
    turned_off = {"code": HANDLER, "enabled": False}  # it runs on nothing, so it batches
    assert problems({"max_events_per_batch": 5}, {"transformation": turned_off}) == {}
    assert problems({"max_events_per_batch": 5, "transformation": turned_off}, {"transformation": transformation}) == {
        "transformation": TRANSFORMATION_AND_BATCHES}


@pytest.mark.parametrize("value, problem", [
    (None, None),
    ({"code": HANDLER}, None),
    ({"code": HANDLER, "enabled": False}, None),
    ("function handler(w) { return w; }", TRANSFORMATION_SHAPE),
    ([HANDLER], TRANSFORMATION_SHAPE),
    ({"code": HANDLER, "language": "js"}, f"has no language: {TRANSFORMATION_SHAPE}"),
    ({"code": HANDLER, "enabled": "yes"}, "enabled must be true or false"),
    ({"code": HANDLER, "enabled": None}, "enabled must be true or false"),
    ({}, "code must be JavaScript defining function handler(webhook)"),
    ({"code": "  \n"}, "code must be JavaScript defining function handler(webhook)"),
    ({"code": 3}, "code must be JavaScript defining function handler(webhook)"),
    ({"code": "x" * 101}, "the code is larger than 100 bytes (HERALD_TRANSFORM_CODE_MAX_BYTES)"),
    ({"code": "é" * 51}, "the code is larger than 100 bytes (HERALD_TRANSFORM_CODE_MAX_BYTES)"),  # 102 bytes
    ({"code": "a\x00b"}, "code contains a NUL character (\\u0000), which cannot be stored"),
    ({"code": "a\ud800b"}, "code contains a lone surrogate (e.g. \\ud800), which is not valid Unicode"),
])
def test_a_transformation_is_code_and_a_switch_or_nothing(value, problem):
    assert transformation_problem(value, code_bytes=100) == problem


def test_a_transformation_is_stored_enabled_unless_it_says_otherwise():
    assert transformation_stored({"code": HANDLER}) == {"code": HANDLER, "enabled": True}
    assert transformation_stored({"code": HANDLER, "enabled": False}) == {"code": HANDLER, "enabled": False}
    assert transformation_stored(None) is None
    assert code_problem("x" * 100, 100) is None


def test_oauth_credentials_come_together_or_not_at_all():
    assert problems({}, OAUTH) == {}
    assert problems({}, {"oauth_token_url": OAUTH["oauth_token_url"]}) == {"oauth_client_id": OAUTH_TOGETHER}
    assert problems(OAUTH, {"oauth_client_secret": "rotated"}) == {}  # the others are stored
    assert problems(OAUTH, {name: "" for name in OAUTH}) == {}  # all removed
    assert problems(OAUTH, {"oauth_client_id": ""}) == {"oauth_client_id": OAUTH_TOGETHER}


def test_oauth_sets_the_authorization_header_itself():
    header = [{"name": "Authorization", "value": "Bearer mine"}]
    assert problems({"delivery_headers": header}, OAUTH) == {"delivery_headers": OAUTH_AUTHORIZATION}
    assert problems(OAUTH, {"delivery_headers": header}) == {"delivery_headers": OAUTH_AUTHORIZATION}
    assert problems(OAUTH, {"delivery_headers": [{"name": "X-Other", "value": "1"}]}) == {}


def test_filters_are_checked_when_they_or_their_scope_change():
    assert "filter_policy" in problems({}, {"filter_policy": {"a": "not a list"}})
    nested = {"a": {"b": ["x"]}}
    assert problems({"filter_policy": nested, "filter_policy_scope": "MessageBody"}, {"endpoint": "elsewhere"}) == {}
    assert "filter_policy" in problems({"filter_policy": nested, "filter_policy_scope": "MessageBody"},
                                       {"filter_policy_scope": "MessageAttributes"})
    assert "event_types" in problems({}, {"event_types": ["ok", 3]})


@pytest.mark.django_db
def test_the_python_services_refuse_what_the_api_refuses(user):
    topic, _ = topic_create(owner=user, name="rules")
    with pytest.raises(ApplicationError) as refused:
        subscription_create(topic=topic, endpoint="http://127.0.0.1:9/a", raw_message_delivery=True,
                            max_events_per_batch=5)
    assert refused.value.as_payload() == {"max_events_per_batch": [RAW_AND_BATCHES]}
    subscription, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/a", max_events_per_batch=5)
    with pytest.raises(ApplicationError):
        subscription_update(subscription=subscription, raw_message_delivery=True)
    subscription.refresh_from_db()
    assert subscription.raw_message_delivery is False

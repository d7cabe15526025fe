"""SNS's delivery policies as AWS writes, returns and merges them (tests/facts/sns_delivery_policies.json, each case
with its source), through Herald's API: the topic form on topics, `null` sections, a subscription's sections merged
over its topic's, `disableSubscriptionOverrides`, and refusals naming the field as it was written."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from delivery.engine.state.effective import policy_for, subscription_policy
from subscriptions.models import Subscription

FACTS = json.loads((Path(__file__).resolve().parents[2] / "facts" / "sns_delivery_policies.json").read_text())
CASES = FACTS["cases"]


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_sns_delivery_policy_fact(api, case):
    topic_body = {"name": "facts"} | ({"delivery_policy": case["topic"]} if "topic" in case else {})
    topic = api.post("/api/topics/", topic_body, format="json")
    refused = case.get("refused")
    if refused and refused["level"] == "topic":
        assert topic.status_code == 400, topic.content
        assert refused["field"] in topic.json()["delivery_policy"], topic.json()
        return
    assert topic.status_code == 201, topic.content
    subscription_body = {"topic": topic.json()["id"], "endpoint": "https://hooks.example.com/sns"}
    if "subscription" in case:
        subscription_body["delivery_policy"] = case["subscription"]
    created = api.post("/api/subscriptions/", subscription_body, format="json")
    if refused:
        assert created.status_code == 400, created.content
        assert refused["field"] in created.json()["delivery_policy"], created.json()
        return
    assert created.status_code == 201, created.content
    effective = subscription_policy(Subscription.objects.get(id=created.json()["id"]))
    expected = case["effective"]
    if expected.get("from_default"):  # (SNS's sicklyRetryPolicy is kept in the document, and has no effect)
        assert replace(effective, document_json="") == replace(policy_for(None, None), document_json="")
    if "delays" in expected:
        assert list(effective.delays) == expected["delays"]
    if "first_delays" in expected:
        assert list(effective.delays[:len(expected["first_delays"])]) == expected["first_delays"]
    if "max_attempts" in expected:
        assert effective.max_attempts == expected["max_attempts"]
    if "max_receives_per_second" in expected:
        assert effective.max_receives_per_second == expected["max_receives_per_second"]
    if "content_type" in expected:
        assert effective.content_type == expected["content_type"]


def test_every_fact_names_its_source():
    assert all(case.get("source") for case in CASES) and len(CASES) >= 16

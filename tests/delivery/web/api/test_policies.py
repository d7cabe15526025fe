"""Policies through the API, on topics and subscriptions alike: validated on write, each level merged into the
effective policy a subscription shows (its preview: test_policy_preview.py)."""

import pytest

from subscriptions.models import Subscription, Topic

pytestmark = pytest.mark.django_db


def test_topic_policy_is_validated_and_inherited(api):
    bad = api.post("/api/topics/", {"name": "t", "delivery_policy": {"preset": "nope"}}, format="json")
    assert bad.status_code == 400 and "preset" in bad.json()["delivery_policy"]
    topic = api.post("/api/topics/", {"name": "t", "delivery_policy": {"preset": "event-grid"}}, format="json").json()
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://example.com/"},
                            format="json").json()
    assert subscription["effective_delivery_policy"]["preset"] == "event-grid"
    own = api.patch(f"/api/subscriptions/{subscription['id']}/", {"delivery_policy": {"preset": "sns-default"}},
                    format="json").json()
    assert own["effective_delivery_policy"]["preset"] == "sns-default"
    invalid = api.patch(f"/api/subscriptions/{subscription['id']}/", {"delivery_policy": {"jitter": 9}},
                        format="json")
    assert invalid.status_code == 400
    assert api.get(f"/api/subscriptions/{subscription['id']}/").json()["delivery_policy"] == {"preset": "sns-default"}


def test_system_default_comes_from_settings(api, settings):
    settings.HERALD_DEFAULT_DELIVERY_POLICY = '{"preset": "event-grid-preview"}'
    topic = api.post("/api/topics/", {"name": "t"}, format="json").json()
    subscription = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://example.com/"},
                            format="json").json()
    assert subscription["effective_delivery_policy"]["preset"] == "event-grid-preview"


def test_a_preset_with_its_own_section_written_out_is_the_preset_merged_too(api):
    topic = api.post("/api/topics/", {"name": "merge"}, format="json").json()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://example.com/",
                                               "delivery_policy": {"preset": "sns-customer-managed",
                                                                   "healthyRetryPolicy": {}}}, format="json")
    assert created.status_code == 201, created.content  # the preset's own schedule: its 6.6 h are not capped
    assert created.json()["effective_delivery_policy"]["preset"] == "sns-customer-managed"


def test_a_policy_valid_alone_that_makes_an_invalid_one_with_its_topics_is_refused(api):
    topic = api.post("/api/topics/", {"name": "grid", "delivery_policy": {"preset": "event-grid"}},
                     format="json").json()
    refused = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "http://example.com/",
                                               "delivery_policy": {"retryLimits": {}}}, format="json")
    assert refused.status_code == 400
    assert "with topic 'grid'" in refused.json()["delivery_policy"]["retryLimits"][0]
    assert not Subscription.objects.exists()

    plain = api.post("/api/topics/", {"name": "plain"}, format="json").json()
    mine = api.post("/api/subscriptions/", {"topic": plain["id"], "endpoint": "http://example.com/",
                                            "delivery_policy": {"retryLimits": {}}}, format="json")
    assert mine.status_code == 201, mine.content
    changed = api.patch(f"/api/topics/{plain['id']}/", {"delivery_policy": {
        "retrySchedule": {"delays": [5], "repeatLast": True}, "retryLimits": {"maxAttempts": 5}}}, format="json")
    assert changed.status_code == 400 and f"subscription {mine.json()['id']}" in str(changed.json())
    assert Topic.objects.get(id=plain["id"]).delivery_policy is None  # nothing written

"""The policy preview (delivery/web/api/policy_preview.py): a policy document's effective policy and the schedule it
produces, with jitter bounds and what ends it; a topic's policy previewed as its subscriptions see it; invalid
documents named field by field; nothing stored."""

import pytest

from delivery.rules.policy import PRESETS
from subscriptions.models import Subscription, Topic

pytestmark = pytest.mark.django_db


def preview(api, document, **extra):
    return api.post("/api/policies/preview/", {"delivery_policy": document, **extra}, format="json")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preview_shows_each_presets_schedule(api, preset):
    response = preview(api, preset)
    assert response.status_code == 200
    body = response.json()
    assert body["effective_delivery_policy"]["preset"] == preset
    assert body["schedule"][0] == {"attempt": 1, "delay": 0.0, "offset": 0.0, "delay_min": 0.0, "delay_max": 0.0}
    assert len(body["schedule"]) > 1


def test_preview_of_workfront_has_the_exact_offsets(api):
    body = preview(api, {"preset": "workfront"}).json()
    assert [row["offset"] for row in body["schedule"]] == pytest.approx(
        [0] + [(2**n - 1) * 84.8 for n in range(1, 12)])
    assert body["max_attempts"] == 12 and body["jitter"] == 0


def test_preview_includes_jitter_bounds(api):
    body = preview(api, {"retrySchedule": {"delays": [10]}, "jitter": 0.2}).json()
    assert body["schedule"][1] == {"attempt": 2, "delay": 10.0, "offset": 10.0, "delay_min": 8.0, "delay_max": 12.0}


def test_preview_rejects_invalid_policies_naming_fields(api):
    response = preview(api, {"jitter": 3, "requestPolicy": {"headerContentType": "image/png"}})
    assert response.status_code == 400
    assert set(response.json()["delivery_policy"]) == {"jitter", "requestPolicy.headerContentType"}


def test_the_preview_of_a_document_answers_every_figure_and_stores_nothing(api):
    answer = preview(api, {"retrySchedule": {"delays": [10]}, "retryLimits": {"maxAttempts": 3}})
    assert answer.json() == {
        "effective_delivery_policy": {"jitter": 0, "preset": "sns-default", "retryLimits": {"maxAttempts": 3},
                                      "retrySchedule": {"delays": [10]}},
        "effective_delivery_policy_sources": {"jitter": "default", "retrySchedule": "subscription",
                                              "retryLimits": "subscription"},
        "max_attempts": 3, "max_age_seconds": None, "jitter": 0.0,
        "schedule": [{"attempt": 1, "delay": 0.0, "offset": 0.0, "delay_min": 0.0, "delay_max": 0.0},
                     {"attempt": 2, "delay": 10.0, "offset": 10.0, "delay_min": 10.0, "delay_max": 10.0}],
        "total_seconds": 10.0, "ends": "ends after attempt 2: the retry schedule has no more delays"}
    assert list(answer.json())[-3:] == ["schedule", "total_seconds", "ends"]
    assert not Topic.objects.exists() and not Subscription.objects.exists()


def test_a_topics_document_is_previewed_as_its_subscriptions_see_it(api):
    sns_topic_form = {"http": {"defaultHealthyRetryPolicy": {"numRetries": 2, "minDelayTarget": 5,
                                                             "maxDelayTarget": 5}}}
    body = preview(api, sns_topic_form).json()
    assert body["effective_delivery_policy_sources"] == {"jitter": "default", "healthyRetryPolicy": "topic"}
    assert ([row["offset"] for row in body["schedule"]], body["ends"]) == (
        [0.0, 5.0, 10.0], "ends after attempt 3: the maximum of 3 attempts")


def test_a_subscriptions_document_is_previewed_over_its_topics(api):
    body = preview(api, {"jitter": 0.1}, topic_delivery_policy={"preset": "event-grid"}).json()
    assert body["effective_delivery_policy_sources"] == {"jitter": "subscription", "retrySchedule": "topic",
                                                         "retryLimits": "topic", "responsePolicy": "topic"}
    assert body["schedule"][2] == {"attempt": 3, "delay": 30.0, "offset": 40.0, "delay_min": 27.0, "delay_max": 33.0}
    assert (body["max_attempts"], body["max_age_seconds"], body["total_seconds"], body["ends"]) == (
        30, 86400, 82000.0, "ends after attempt 11 (of at most 30): attempt 12 would come after the time-to-live of "
                            "86400 s")


def test_the_preview_takes_a_document_and_nothing_else(api):
    missing = api.post("/api/policies/preview/", {}, format="json")
    assert (missing.status_code, missing.json()) == (400, {"delivery_policy": ["This field is required."]})
    typo = api.post("/api/policies/preview/", {"delivery_policy": "workfront", "topic_policy": {}}, format="json")
    assert typo.json() == {"topic_policy": [
        "unknown field; this request takes delivery_policy, topic_delivery_policy"]}

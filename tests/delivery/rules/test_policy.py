"""The policy module: exact schedules for SNS, Workfront and Event Grid, validation rules, round trips."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.engine.state.effective import policy_for
from delivery.rules.policy import PRESETS, PolicyError, parse

SNS_DOC_EXAMPLE = {"minDelayTarget": 1, "maxDelayTarget": 60, "numRetries": 50, "numNoDelayRetries": 3,
                   "numMinDelayRetries": 2, "numMaxDelayRetries": 35, "backoffFunction": "exponential"}


def errors_of(document) -> dict:
    with pytest.raises(PolicyError) as caught:
        parse(document)
    return caught.value.as_dict()


def test_sns_documentation_example_phases():
    delays = parse({"healthyRetryPolicy": SNS_DOC_EXAMPLE}).delays
    assert len(delays) == 50
    assert delays[:3] == (0, 0, 0)
    assert delays[3:5] == (1, 1)
    backoff = delays[5:15]
    assert backoff[0] == 1 and backoff[-1] == 60
    assert all(a <= b for a, b in zip(backoff, backoff[1:], strict=False))
    assert delays[15:] == (60,) * 35


def test_sns_default_is_three_retries_twenty_seconds_apart():
    policy = parse("sns-default")
    assert policy.delays == (20, 20, 20)
    assert policy.max_attempts == 4
    assert [row["offset"] for row in policy.schedule()] == [0, 20, 40, 60]
    assert parse({}).delays == (20, 20, 20)  # an empty SNS policy means SNS's defaults


def test_sns_customer_managed_is_fifty_retries_over_about_six_hours():
    policy = parse("sns-customer-managed")
    assert len(policy.delays) == 50  # AWS counts these 50 retries as "50 attempts"
    assert policy.delays[:2] == (10, 10)
    assert policy.delays[2] == 10 and policy.delays[11] == 600
    assert policy.delays[12:] == (600,) * 38
    total_hours = sum(policy.delays) / 3600
    assert 6.0 < total_hours < 7.0


@pytest.mark.parametrize("function", ["linear", "arithmetic", "geometric", "exponential"])
def test_each_backoff_function_runs_from_min_to_max_without_falling(function):
    delays = parse({"healthyRetryPolicy": {"minDelayTarget": 2, "maxDelayTarget": 100, "numRetries": 8,
                                           "backoffFunction": function}}).delays
    assert delays[0] == 2 and delays[-1] == 100
    assert all(a <= b for a, b in zip(delays, delays[1:], strict=False))


def test_backoff_functions_give_the_documented_formulas():
    def backoff(function):
        return parse({"healthyRetryPolicy": {"minDelayTarget": 1, "maxDelayTarget": 9, "numRetries": 3,
                                             "backoffFunction": function}}).delays

    assert backoff("linear") == (1, 5, 9)
    assert backoff("arithmetic") == (1, 3, 9)  # 1 + 8 * (i-1)^2 / 4
    assert backoff("geometric") == pytest.approx((1, 3, 9))  # x = 9^(1/2) = 3: 3^(i-1) + 0
    a = 8 / (math.e**2 - 1)
    assert backoff("exponential") == pytest.approx((1, a * math.e + 1 - a, 9))


def test_the_four_backoff_functions_differ():
    def backoff(function):
        return parse({"healthyRetryPolicy": {"minDelayTarget": 2, "maxDelayTarget": 100, "numRetries": 6,
                                             "backoffFunction": function}}).delays

    assert len({backoff(f) for f in ["linear", "arithmetic", "geometric", "exponential"]}) == 4


def test_one_backoff_retry_uses_the_minimum():
    assert parse({"healthyRetryPolicy": {"minDelayTarget": 5, "maxDelayTarget": 50, "numRetries": 1}}).delays == (5,)


def test_workfront_retry_n_is_at_2n_minus_1_times_84_8_seconds_after_the_first_failure():
    policy = parse("workfront")
    offsets = [row["offset"] for row in policy.schedule()[1:]]
    assert offsets == pytest.approx([(2**n - 1) * 84.8 for n in range(1, 12)])
    assert round(offsets[0] / 60, 1) == 1.4
    assert round(offsets[1] / 60, 1) == 4.2
    assert round(offsets[10] / 3600, 1) == 48.2
    assert policy.retry_delay(11) is not None and policy.retry_delay(12) is None  # no 12th retry
    assert policy.jitter == 0


def test_event_grid_schedule_and_time_to_live():
    policy = parse("event-grid")
    rows = policy.schedule()
    assert [row["delay"] for row in rows[1:]] == [10, 30, 60, 300, 600, 1800, 3600, 10800, 21600, 43200]
    assert rows[-1]["offset"] == 82000  # the next 12 h retry would land past the 24 h time-to-live
    assert policy.retry_delay(15) == 43200  # 12 h repeats, up to 30 attempts
    assert policy.retry_delay(29) == 43200 and policy.retry_delay(30) is None
    assert policy.max_age_seconds == 86400
    assert policy.permanent_failure_codes == {400, 401, 403, 413}


def test_event_grid_preview_schedule_and_time_to_live():
    rows = parse("event-grid-preview").schedule()
    assert [row["delay"] for row in rows[1:]] == [10, 30, 60, 300, 600, 1800, 3600]
    assert rows[-1]["offset"] == 6400  # the next hourly retry would pass the 2 h time-to-live


def test_preset_plus_explicit_keys_merge_with_the_keys_winning():
    policy = parse({"preset": "event-grid", "retryLimits": {"maxAttempts": 3}, "jitter": 0})
    assert policy.max_attempts == 3 and policy.max_age_seconds == 86400 and policy.jitter == 0
    switched = parse({"preset": "workfront", "retrySchedule": {"delays": [5]}})
    assert switched.delays == (5,) and switched.max_attempts == 12


def test_effective_policy_is_subscription_then_topic_then_default(settings):
    assert policy_for({"preset": "event-grid"}, {"preset": "sns-default"}).max_age_seconds == 86400
    assert policy_for(None, {"preset": "sns-default"}).delays == (20, 20, 20)
    settings.HERALD_DEFAULT_DELIVERY_POLICY = "workfront"
    assert policy_for(None, None).max_attempts == 12


@pytest.mark.parametrize("document, path", [
    ({"healthyRetryPolicy": {"minDelayTarget": 0}}, "healthyRetryPolicy.minDelayTarget"),
    ({"healthyRetryPolicy": {"minDelayTarget": 30, "maxDelayTarget": 20}}, "healthyRetryPolicy.minDelayTarget"),
    ({"healthyRetryPolicy": {"maxDelayTarget": 3601}}, "healthyRetryPolicy.maxDelayTarget"),
    ({"healthyRetryPolicy": {"numRetries": 101}}, "healthyRetryPolicy.numRetries"),
    ({"healthyRetryPolicy": {"numRetries": -1}}, "healthyRetryPolicy.numRetries"),
    ({"healthyRetryPolicy": {"numNoDelayRetries": -1}}, "healthyRetryPolicy.numNoDelayRetries"),
    ({"healthyRetryPolicy": {"numRetries": 2, "numNoDelayRetries": 2, "numMaxDelayRetries": 1}},
     "healthyRetryPolicy.numRetries"),
    ({"healthyRetryPolicy": {"backoffFunction": "cubic"}}, "healthyRetryPolicy.backoffFunction"),
    ({"healthyRetryPolicy": {"numRetries": "3"}}, "healthyRetryPolicy.numRetries"),
    ({"healthyRetryPolicy": {"minDelayTarget": 60, "maxDelayTarget": 60, "numRetries": 61}}, "healthyRetryPolicy"),
    ({"healthyRetryPolicy": {}, "retrySchedule": {"delays": [1]}}, "retrySchedule"),
    ({"retrySchedule": {"delays": []}}, "retrySchedule.delays"),
    ({"retrySchedule": {"delays": [1, -1]}}, "retrySchedule.delays[1]"),
    ({"retrySchedule": {"delays": [1], "repeatLast": True}}, "retryLimits"),
    ({"retryLimits": {"maxAttempts": 0}}, "retryLimits.maxAttempts"),
    ({"retryLimits": {"maxAgeSeconds": 0}}, "retryLimits.maxAgeSeconds"),
    ({"jitter": 0.6}, "jitter"),
    ({"jitter": -0.1}, "jitter"),
    ({"throttlePolicy": {"maxReceivesPerSecond": 0}}, "throttlePolicy.maxReceivesPerSecond"),
    ({"requestPolicy": {"headerContentType": "application/pdf"}}, "requestPolicy.headerContentType"),
    ({"requestPolicy": {"timeoutSeconds": 61}}, "requestPolicy.timeoutSeconds"),
    ({"requestPolicy": {"timeoutSeconds": 0}}, "requestPolicy.timeoutSeconds"),
    ({"responsePolicy": {"permanentFailureCodes": [200]}}, "responsePolicy.permanentFailureCodes"),
    ({"responsePolicy": {"permanentFailureCodes": "400"}}, "responsePolicy.permanentFailureCodes"),
    ({"redrivePolicy": {"deadLetter": "yes"}}, "redrivePolicy.deadLetter"),
    ({"preset": "azure"}, "preset"),
    ({"retries": 3}, "retries"),
    ({"throttlePolicy": {"rate": 1}}, "throttlePolicy.rate"),
])
def test_each_validation_rule(document, path):
    assert path in errors_of(document)


def test_every_error_is_reported_at_once():
    errors = errors_of({"jitter": 1, "requestPolicy": {"timeoutSeconds": 0}, "redrivePolicy": {"deadLetter": 1}})
    assert set(errors) == {"jitter", "requestPolicy.timeoutSeconds", "redrivePolicy.deadLetter"}


def test_the_3600_second_cap_applies_to_written_policies_not_to_presets():
    parse("sns-customer-managed")  # 6 h: a preset is Herald's own schedule
    assert "healthyRetryPolicy" in errors_of({"preset": "sns-customer-managed",
                                              "healthyRetryPolicy": {"numRetries": 60}})


def test_repr_and_round_trip():
    policy = parse({"preset": "event-grid", "throttlePolicy": {"maxReceivesPerSecond": 5}})
    assert parse(policy.document) == policy
    assert repr(policy).startswith("DeliveryPolicy({") and "maxReceivesPerSecond" in repr(policy)


healthy_policies = st.integers(1, 60).flatmap(lambda low: st.fixed_dictionaries({
    "minDelayTarget": st.just(low),
    "maxDelayTarget": st.integers(low, 120),
    "numRetries": st.integers(0, 20),
    "backoffFunction": st.sampled_from(["linear", "arithmetic", "geometric", "exponential"]),
}))
schedules = st.fixed_dictionaries({
    "delays": st.lists(st.integers(0, 3600), min_size=1, max_size=12),
    "repeatLast": st.booleans(),
})
documents = st.one_of(
    st.builds(lambda h, j: {"healthyRetryPolicy": h, "jitter": j}, healthy_policies, st.floats(0, 0.5)),
    st.builds(lambda s, n, j: {"retrySchedule": s, "retryLimits": {"maxAttempts": n}, "jitter": j},
              schedules, st.integers(1, 40), st.floats(0, 0.5)),
    st.sampled_from(sorted(PRESETS)),
)


@settings(max_examples=200, deadline=None)
@given(documents)
def test_any_valid_policy_round_trips_and_keeps_its_bounds(document):
    policy = parse(document)
    assert parse(policy.document) == policy
    rows = policy.schedule(limit=1000)
    if policy.max_attempts is not None:
        assert len(rows) <= policy.max_attempts
    if policy.max_age_seconds is not None:
        assert rows[-1]["offset"] <= policy.max_age_seconds
    if isinstance(document, dict) and "healthyRetryPolicy" in document:
        low, high = document["healthyRetryPolicy"]["minDelayTarget"], document["healthyRetryPolicy"]["maxDelayTarget"]
        assert all(low <= delay <= high for delay in policy.delays)
        assert sum(policy.delays) <= 3600

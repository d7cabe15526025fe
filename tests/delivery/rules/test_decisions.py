"""What happens after an attempt: exact times, limits, permanent failures, Retry-After, dropping."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.rules.decisions import DEAD_LETTER, DROP, RETRY, SUCCEED, Answer, decide, parse_retry_after
from delivery.rules.policy import parse

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RNG = random.Random(7)


def after(policy, attempt, status=500, now=T0, published=T0, retry_after=None, rng=RNG):
    return decide(parse(policy), attempt_number=attempt, published_at=published, now=now, rng=rng,
                  answer=Answer(status=status, retry_after=retry_after))


def test_any_2xx_succeeds():
    for status in (200, 201, 204, 299):
        assert after("workfront", 1, status).action == SUCCEED


@pytest.mark.parametrize("status", [None, 301, 404, 429, 500, 503])
def test_everything_else_is_retried_at_the_scheduled_time(status):
    decision = after({"retrySchedule": {"delays": [5, 7]}}, 2, status)
    assert decision.action == RETRY and decision.next_attempt_at == T0 + timedelta(seconds=7)
    assert decision.attempt_outcome == "retryable_failure"


def test_max_attempts_dead_letters():
    policy = {"retrySchedule": {"delays": [1], "repeatLast": True}, "retryLimits": {"maxAttempts": 3}}
    assert after(policy, 2).action == RETRY
    final = after(policy, 3)
    assert (final.action, final.reason) == (DEAD_LETTER, "max_attempts")


def test_time_to_live_dead_letters_when_the_next_attempt_would_be_too_late():
    policy = {"retrySchedule": {"delays": [60]}, "retryLimits": {"maxAgeSeconds": 100}}
    assert after(policy, 1, now=T0 + timedelta(seconds=40)).action == RETRY
    late = after(policy, 1, now=T0 + timedelta(seconds=41))
    assert (late.action, late.reason) == (DEAD_LETTER, "ttl_expired")


def test_permanent_failure_codes_dead_letter_at_once():
    decision = after({"responsePolicy": {"permanentFailureCodes": [400]}}, 1, 400)
    assert (decision.action, decision.reason, decision.attempt_outcome) == (DEAD_LETTER, "permanent_failure",
                                                                           "permanent_failure")


def test_410_gone_dead_letters_and_freezes_the_endpoint():
    decision = after("workfront", 1, 410)
    assert (decision.action, decision.reason, decision.freeze_endpoint) == (DEAD_LETTER, "permanent_failure", True)


def test_drop_instead_of_dead_letter_when_redrive_is_off():
    decision = after({"retrySchedule": {"delays": [1]}, "redrivePolicy": {"deadLetter": False}}, 2)
    assert (decision.action, decision.reason) == (DROP, "max_attempts")


@pytest.mark.parametrize("status", [429, 502, 503, 504])  # Standard Webhooks' throttling statuses, and 503's
def test_retry_after_waits_at_least_that_long_capped_at_an_hour(status):
    policy = {"retrySchedule": {"delays": [5], "repeatLast": True}, "retryLimits": {"maxAttempts": 9}}
    assert after(policy, 1, status, retry_after=30).next_attempt_at == T0 + timedelta(seconds=30)
    assert after(policy, 1, status, retry_after=2).next_attempt_at == T0 + timedelta(seconds=5)
    assert after(policy, 1, status, retry_after=99999).next_attempt_at == T0 + timedelta(seconds=3600)
    assert after(policy, 1, 500, retry_after=30).next_attempt_at == T0 + timedelta(seconds=5)
    assert after(policy, 1, 501, retry_after=30).next_attempt_at == T0 + timedelta(seconds=5)


def test_retry_after_header_forms():
    assert parse_retry_after("120", T0) == 120
    assert parse_retry_after("Thu, 01 Jan 2026 00:01:00 GMT", T0) == 60
    assert parse_retry_after("soon", T0) is None
    assert parse_retry_after(None, T0) is None


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 0.5), st.integers(1, 3600), st.integers(0, 2**32))
def test_jitter_stays_within_its_bounds(jitter, delay, seed):
    policy = {"retrySchedule": {"delays": [delay]}, "jitter": jitter}
    decision = after(policy, 1, rng=random.Random(seed))
    waited = (decision.next_attempt_at - T0).total_seconds()
    assert delay * (1 - jitter) - 1e-6 <= waited <= delay * (1 + jitter) + 1e-6


def herald_ended(policy, attempt, now, published=T0):
    return decide(parse(policy), attempt_number=attempt, published_at=published, now=now, rng=RNG,
                  answer=Answer(status=None, error_class="cut_short"))


def test_a_try_herald_ended_waits_its_policys_delay_and_is_not_counted():
    decision = herald_ended({"retrySchedule": {"delays": [5, 7]}}, 2, T0)
    assert (decision.action, decision.counted, decision.next_attempt_at) == (RETRY, False, T0 + timedelta(seconds=7))
    # the last attempt of its schedule: the delay before it, and still not counted
    last = herald_ended({"retrySchedule": {"delays": [5, 7]}}, 3, T0)
    assert (last.action, last.counted, last.next_attempt_at) == (RETRY, False, T0 + timedelta(seconds=7))


def test_a_try_herald_ended_under_one_attempt_waits_a_second():
    decision = herald_ended({"retryLimits": {"maxAttempts": 1}}, 1, T0)
    assert (decision.action, decision.next_attempt_at) == (RETRY, T0 + timedelta(seconds=1))


def test_tries_herald_keeps_ending_stop_at_the_deliverys_lifetime_even_without_a_time_to_live():
    sns_default = "sns-default"  # 3 retries 20 s apart: a lifetime of 60 s, no time-to-live
    assert herald_ended(sns_default, 1, T0 + timedelta(seconds=30)).action == RETRY
    late = herald_ended(sns_default, 1, T0 + timedelta(seconds=50))
    assert (late.action, late.reason) == (DEAD_LETTER, "ttl_expired")
    with_ttl = herald_ended({"retrySchedule": {"delays": [5]}, "retryLimits": {"maxAgeSeconds": 600}}, 1,
                            T0 + timedelta(seconds=596))
    assert (with_ttl.action, with_ttl.reason) == (DEAD_LETTER, "ttl_expired")

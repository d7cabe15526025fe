"""The circuit's rules at their boundaries, with a fake clock."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.rules.circuit import ACTIVE, DISABLED, FROZEN, Health, Thresholds, next_state

NOW = datetime(2026, 6, 1, tzinfo=UTC)
LIMITS = Thresholds()
RECENT = NOW - timedelta(hours=1)


def health(state=ACTIVE, consecutive=0, attempts=0, failures=0, last_success=RECENT):
    return Health(state, consecutive, attempts, failures, last_success)


def to(h, **kwargs):
    transition = next_state(h, LIMITS, NOW, **kwargs)
    return transition.to_state if transition else None


def test_failure_rate_needs_more_than_100_attempts():
    assert to(health(attempts=100, failures=100)) is None
    assert to(health(attempts=101, failures=101)) == DISABLED


def test_failure_rate_must_exceed_70_percent():
    assert to(health(attempts=1000, failures=700)) is None  # 70.0 %
    assert to(health(attempts=1000, failures=701)) == DISABLED  # 70.1 %


def test_consecutive_failures_disable_at_2000():
    assert to(health(consecutive=1999)) is None
    assert to(health(consecutive=2000)) == DISABLED


def test_freeze_needs_more_than_2000_consecutive_failures_and_72h_of_silence():
    silent = NOW - timedelta(hours=72, seconds=1)
    barely = NOW - timedelta(hours=72) + timedelta(seconds=1)
    assert to(health(DISABLED, consecutive=2000, last_success=silent)) is None
    assert to(health(DISABLED, consecutive=2001, last_success=silent)) == FROZEN
    assert to(health(DISABLED, consecutive=2001, last_success=barely)) is None
    assert to(health(DISABLED, consecutive=2001, last_success=None)) == FROZEN
    assert to(health(ACTIVE, consecutive=2001, last_success=silent)) == FROZEN


def test_50000_consecutive_failures_freeze_even_after_a_recent_success():
    assert to(health(DISABLED, consecutive=49_999)) is None
    assert to(health(DISABLED, consecutive=50_000)) == FROZEN


def test_410_freezes_from_any_unfrozen_state():
    assert to(health(ACTIVE), gone=True) == FROZEN
    assert to(health(DISABLED), gone=True) == FROZEN


def test_a_probe_success_reactivates_a_disabled_endpoint():
    assert to(health(DISABLED, consecutive=0), probe_succeeded=True) == ACTIVE
    assert to(health(DISABLED, consecutive=5)) is None


def test_frozen_is_left_only_by_hand():
    assert to(health(FROZEN), probe_succeeded=True) is None
    assert to(health(FROZEN, consecutive=60_000), gone=True) is None


def test_reasons_are_readable():
    transition = next_state(health(attempts=200, failures=150), LIMITS, NOW)
    assert transition.reason == "150 of 200 attempts failed in the rate window (75.0%)"


@pytest.mark.parametrize("limits, h, expected", [
    (Thresholds(disable_min_attempts=3, disable_failure_rate=0.5), health(attempts=4, failures=3), DISABLED),
    (Thresholds(freeze_absolute_failures=10), health(consecutive=10), FROZEN),
])
def test_thresholds_are_configurable(limits, h, expected):
    assert next_state(h, limits, NOW).to_state == expected

"""Each delivery transition sets every field it implies (what follows it is the lifecycle's: test_lifecycle)."""

from datetime import UTC, datetime, timedelta

from django.db.models import F

from delivery.engine.state import transitions
from delivery.models import Delivery
from delivery.rules.decisions import DEAD_LETTER, DROP, RETRY, SUCCEED, Decision

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def delivery(**fields) -> Delivery:
    return Delivery(attempt_count=fields.pop("attempt_count", 2), first_attempt_at=fields.pop("first", NOW), **fields)


def test_a_try_that_succeeded():
    changes = transitions.attempted(delivery(), Decision(SUCCEED, "success"), now=NOW)
    assert changes == {"status": "succeeded", "delivered_at": NOW, "finished_at": NOW, "next_attempt_at": None,
                       "lease_until": None, "attempt_count": 3, "last_attempt_at": NOW}


def test_a_try_that_will_be_retried():
    at = NOW + timedelta(seconds=30)
    changes = transitions.attempted(delivery(first=None, attempt_count=0),
                                    Decision(RETRY, "retryable_failure", next_attempt_at=at), now=NOW)
    assert changes == {"status": "pending", "next_attempt_at": at, "lease_until": None,
                       "attempt_count": 1, "last_attempt_at": NOW, "first_attempt_at": NOW}


def test_a_try_that_ends_it():
    dead = transitions.attempted(delivery(), Decision(DEAD_LETTER, "retryable_failure", reason="max_attempts"),
                                 now=NOW)
    assert dead == {"status": "dead_lettered", "dead_letter_reason": "max_attempts", "next_attempt_at": None,
                    "finished_at": NOW, "lease_until": None, "attempt_count": 3,
                    "last_attempt_at": NOW}
    dropped = transitions.decided(Decision(DROP, "retryable_failure", reason="ttl_expired"), now=NOW)
    assert dropped["status"] == "dropped" and dropped["dead_letter_reason"] == "ttl_expired"


def test_hold_defer_release():
    assert transitions.on_hold() == {"status": "pending", "next_attempt_at": None, "lease_until": None}
    later = NOW + timedelta(seconds=1)
    assert transitions.deferred(later) == {"status": "pending", "next_attempt_at": later, "lease_until": None}
    assert transitions.released(now=NOW) == {"next_attempt_at": NOW}
    assert transitions.next_in_line(now=NOW) == {"status": "pending", "next_attempt_at": NOW}


def test_claim_and_queue_bookkeeping():
    lease = NOW + timedelta(seconds=40)
    assert transitions.claimed(lease=lease) == {"status": "in_flight", "lease_until": lease}
    assert transitions.initial(due=NOW) == {"status": "pending", "next_attempt_at": NOW}
    assert transitions.initial(due=None)["next_attempt_at"] is None  # held from the start (paused)


def test_fresh_budget_and_finish_by_hand():
    fresh = transitions.fresh_budget(now=NOW)
    assert fresh == {"status": "pending", "next_attempt_at": NOW, "dead_letter_reason": "",
                     "finished_at": None, "lease_until": None, "budget_attempts": F("attempt_count"),
                     "budget_started_at": NOW}
    assert transitions.finished("dead_lettered", "manual", now=NOW) == {
        "status": "dead_lettered", "dead_letter_reason": "manual", "next_attempt_at": None, "finished_at": NOW,
        "lease_until": None}


def test_a_try_herald_ended_is_recorded_and_spends_no_attempt_of_the_budget():
    at = NOW + timedelta(seconds=20)
    changes = transitions.attempted(delivery(attempt_count=2, budget_attempts=1),
                                    Decision(RETRY, "retryable_failure", next_attempt_at=at, counted=False), now=NOW)
    assert changes == {"status": "pending", "next_attempt_at": at, "lease_until": None, "attempt_count": 3,
                       "budget_attempts": 2, "last_attempt_at": NOW}

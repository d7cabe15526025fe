"""Delivery state changes as field changes (pure; no database access).

Each function returns every field its transition implies, so no writer has to remember to clear the lease or
the queued flag. They are applied under the lease by `leases.write_back` (the attempt path) or by the
reconciler's conditional updates.
"""

from .decisions import DEAD_LETTER, RETRY, SUCCEED, Decision
from .models import Delivery

Status = Delivery.Status


def attempted(delivery: Delivery, decision: Decision, *, now) -> dict:
    """After a try (sent, lost with its worker, or failed inside Herald): counted, then as the policy decided."""
    changes = {"lease_until": None, "queued": False, "attempt_count": delivery.attempt_count + 1,
               "last_attempt_at": now}
    if delivery.first_attempt_at is None:
        changes["first_attempt_at"] = now
    return {**changes, **decided(decision, now=now)}


def decided(decision: Decision, *, now) -> dict:
    """Where a policy decision leaves a delivery: succeeded, pending until the retry, or finished with a reason."""
    if decision.action == SUCCEED:
        return {"status": Status.SUCCEEDED, "delivered_at": now, "next_attempt_at": None, "finished_at": now,
                "lease_until": None, "queued": False}
    if decision.action == RETRY:
        return {"status": Status.PENDING, "next_attempt_at": decision.next_attempt_at, "lease_until": None,
                "queued": False}
    status = Status.DEAD_LETTERED if decision.action == DEAD_LETTER else Status.DROPPED
    return {"status": status, "dead_letter_reason": decision.reason, "next_attempt_at": None, "finished_at": now,
            "lease_until": None, "queued": False}


def held() -> dict:
    """Not attempted now (subscription paused or unconfirmed, endpoint disabled or frozen): pending with no due
    time until released; the time-to-live still runs. Holding spends no attempt."""
    return {"status": Status.PENDING, "next_attempt_at": None, "lease_until": None, "queued": False}


def deferred(until) -> dict:
    """Not attempted now (throttled, or its job failed before sending): due again at `until`. Not an attempt."""
    return {"status": Status.PENDING, "next_attempt_at": until, "lease_until": None, "queued": False}


def wakes_scheduler(changes: dict) -> bool:
    """Does this change leave work due at a time the scheduler must plan for?"""
    return changes.get("status") == Status.PENDING and changes.get("next_attempt_at") is not None

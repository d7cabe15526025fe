"""Every change of a delivery's state, as the field changes it implies (no database access): the lifecycle's
vocabulary.

Each function returns every field its transition implies, so no writer has to remember to clear the lease. Every
status write in Herald goes through one of these: under the lease by `leases.write_back` (the attempt path, whose
follow-ups are `lifecycle.settled`), or by a function of `lifecycle.py`, the door.
"""

from django.db.models import F

from delivery.rules.decisions import CANCEL, DEAD_LETTER, RETRY, SUCCEED, Decision
from delivery.rules.vocabulary import DeliveryStatus as Status


def attempted(delivery, decision: Decision, *, now) -> dict:
    """After a try (sent, lost with its worker, or failed inside Herald): counted, then as the policy decided."""
    changes = {"lease_until": None, "attempt_count": delivery.attempt_count + 1,
               "last_attempt_at": now}
    if delivery.first_attempt_at is None:
        changes["first_attempt_at"] = now
    if not decision.counted:  # Herald's own failure: recorded, but the budget counts from one attempt later
        changes["budget_attempts"] = delivery.budget_attempts + 1
    return {**changes, **decided(decision, now=now)}


def decided(decision: Decision, *, now) -> dict:
    """Where a policy decision leaves a delivery: succeeded, pending until the retry, or finished with a reason."""
    if decision.action == SUCCEED:
        return {"status": Status.SUCCEEDED, "delivered_at": now, "next_attempt_at": None, "finished_at": now,
                "lease_until": None}
    if decision.action == RETRY:
        return {"status": Status.PENDING, "next_attempt_at": decision.next_attempt_at, "lease_until": None}
    status = {DEAD_LETTER: Status.DEAD_LETTERED, CANCEL: Status.CANCELLED}.get(decision.action, Status.DROPPED)
    return {"status": status, "dead_letter_reason": decision.reason, "next_attempt_at": None, "finished_at": now,
            "lease_until": None}


def on_hold() -> dict:
    """Not attempted now (subscription paused or unconfirmed, endpoint disabled or frozen): pending with no due
    time until released; the time-to-live still runs. Holding spends no attempt."""
    return {"status": Status.PENDING, "next_attempt_at": None, "lease_until": None}


def deferred(until) -> dict:
    """Not attempted now (throttled, or its job failed before sending): due again at `until`. Not an attempt."""
    return {"status": Status.PENDING, "next_attempt_at": until, "lease_until": None}


def initial(*, due) -> dict:
    """A new delivery: pending, due at `due` (publish time), or held (None) while its subscription is paused."""
    return {"status": Status.PENDING, "next_attempt_at": due}


def claimed(*, lease) -> dict:
    """Taken by one job: in flight until it records the try or `lease` runs out."""
    return {"status": Status.IN_FLIGHT, "lease_until": lease}


def released(*, now) -> dict:
    """Held no longer (endpoint recovered, subscription resumed, a probe is due): due at once."""
    return {"next_attempt_at": now}


def next_in_line(*, now) -> dict:
    """Ordered delivery: the previous message of its key finished (or ordering was turned off); due at once."""
    return {"status": Status.PENDING, "next_attempt_at": now}


def fresh_budget(*, now) -> dict:
    """Redriven, recovered or retried by hand: pending and due now, with a new attempt budget whose attempts are
    counted from here and whose time-to-live runs from now."""
    return {"status": Status.PENDING, "next_attempt_at": now, "dead_letter_reason": "",
            "finished_at": None, "lease_until": None, "budget_attempts": F("attempt_count"), "budget_started_at": now}


def finished(status: str, reason: str, *, now) -> dict:
    """Ended without a try: dead-lettered or dropped by hand, or past its time-to-live while held."""
    return {"status": status, "dead_letter_reason": reason, "next_attempt_at": None, "finished_at": now,
            "lease_until": None}

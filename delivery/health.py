"""Endpoint health bookkeeping on the attempt path: counters updated atomically in the database."""

from django.db.models import F
from django.db.models.functions import Greatest

from subscriptions.models import Endpoint


def record_results(endpoint_id: int, outcomes: list[bool], now) -> None:
    """Apply a batch of attempt outcomes (True = success), in order, to one endpoint's counters.

    Every increment happens in SQL (F expressions), so concurrent workers never lose an update.
    """
    if not outcomes:
        return
    failures = outcomes.count(False)
    changes = {
        "window_attempts": F("window_attempts") + len(outcomes),
        "window_failures": F("window_failures") + failures,
    }
    if True in outcomes:
        trailing = len(outcomes) - 1 - max(i for i, ok in enumerate(outcomes) if ok)
        changes.update(consecutive_failures=trailing, last_success_at=now)
    else:
        changes["consecutive_failures"] = Greatest(F("consecutive_failures") + failures, 0)
    if failures:
        changes["last_failure_at"] = now
    Endpoint.objects.filter(id=endpoint_id).update(**changes)

"""Waking the scheduler (`herald_cron`): a one-element Redis list it blocks on while it sleeps until the next due
time. Rows due now never need it (they ask for a pump); rows due sooner than it planned do."""

import logging

from delivery.engine.plumbing import availability, redis_link
from delivery.engine.plumbing.database import after_commit
from delivery.rules.vocabulary import AttemptQueue

log = logging.getLogger(__name__)
WAKE_KEY = "herald:scheduler:wake"
QUEUE_CONNECTION = AttemptQueue.RETRIES


def redis():
    return redis_link.connection(QUEUE_CONNECTION)


def wake_scheduler() -> None:
    """Tell a sleeping scheduler that a delivery may now be due sooner than it planned."""
    try:
        with redis().pipeline() as pipe:
            pipe.lpush(WAKE_KEY, 1).ltrim(WAKE_KEY, 0, 0).execute()
    except Exception as exc:  # the scheduler also wakes by itself every interval
        availability.redis_failed(exc, log, "could not wake the scheduler")


def wake_scheduler_after_commit() -> None:
    """Call inside the transaction that scheduled rows; the scheduler is woken once it commits."""
    after_commit(wake_scheduler)

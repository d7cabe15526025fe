"""Waking the scheduler: a one-element Redis list it blocks on while it sleeps until the next due time."""

import logging

from delivery.engine import availability, redis_link
from delivery.rules.vocabulary import AttemptQueue

log = logging.getLogger(__name__)
WAKE_KEY = "herald:dispatcher:wake"
QUEUE_CONNECTION = AttemptQueue.RETRIES


def redis():
    return redis_link.connection(QUEUE_CONNECTION)


def wake_dispatcher() -> None:
    """Tell a sleeping dispatcher that a retry may now be due sooner than it planned."""
    try:
        with redis().pipeline() as pipe:
            pipe.lpush(WAKE_KEY, 1).ltrim(WAKE_KEY, 0, 0).execute()
    except Exception as exc:  # the dispatcher also wakes by itself every interval
        availability.redis_failed(exc, log, "could not wake the dispatcher")

"""The operators' counters (engine/plumbing/counters.py): added to Redis as they are made, or, in Herald's own
long-running processes, tallied and added once a second in one pipeline; a failed write is never applied twice."""

import logging
import os
from collections import Counter

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from delivery.engine.plumbing import counters, redis_link


def stored(redis_conn) -> dict:
    return {key.decode(): int(value) for key, value in redis_conn.hgetall(counters.COUNTERS).items()}


@pytest.fixture
def buffering(redis_conn):
    counters.buffer()
    yield
    counters.unbuffer()


def test_unbuffered_counts_reach_redis_as_they_are_made(redis_conn):
    counters.add({counters.field("messages_published"): 2})
    assert stored(redis_conn) == {"messages_published": 2}


def test_buffered_counts_are_tallied_then_added_in_one_flush(buffering, redis_conn):
    for _ in range(100):  # a hundred recorded batches or publishes
        counters.add(Counter({counters.field("messages_published"): 2}))
    counters.add({counters.field("attempts", "success", "", "deliveries"): 3},
                 {"attempt_duration_seconds": [0.004, 0.2, 99]})
    counters.flush()  # (the flusher thread may have added part of it already: the sums are the same)
    assert stored(redis_conn) == {"messages_published": 200, "attempts|success||deliveries": 3}
    _, histograms = counters.read()
    assert histograms["attempt_duration_seconds"]["buckets"][0] == (0.005, 1)
    assert histograms["attempt_duration_seconds"]["buckets"][-1] == ("+Inf", 3)


def test_a_scrape_in_this_process_sees_its_own_tally(buffering, redis_conn):
    counters.add({counters.field("deliveries_created"): 4})
    found, _ = counters.read()
    assert found[("deliveries_created",)] == 4


def test_a_failed_write_is_said_once_and_never_applied_twice(buffering, redis_conn, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=counters.__name__)
    counters._state["failing"] = False  # whatever an earlier test left

    def away(*args, **kwargs):
        raise RedisConnectionError("Redis is away")

    with monkeypatch.context() as patched:
        patched.setattr(redis_link, "connection", away)
        for _ in range(3):
            counters.add({counters.field("messages_published"): 5})
            counters.flush()  # never raises
    counters.add({counters.field("messages_published"): 1})
    counters.flush()
    # what the failed pipelines carried may or may not have been applied: never added again
    assert stored(redis_conn) == {"messages_published": 1}
    assert caplog.text.count("operator counters not updated") == 1
    assert "added to Redis again" in caplog.text


def test_a_forked_child_starts_with_an_empty_tally_and_does_not_buffer(buffering, redis_conn):
    counters.add({counters.field("messages_published"): 7})
    pid = os.fork()
    if pid == 0:  # the child: the parent's tally is the parent's to add
        os._exit(0 if not any(counters._pending.values()) and not counters._state["buffering"] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    counters.flush()
    assert stored(redis_conn) == {"messages_published": 7}  # once, by the parent

"""The operators' counters: each process tallies and adds its tally to Redis once a second, in one pipeline; what
Redis does not take waits for the next flush (engine/plumbing/counters.py)."""

from collections import Counter

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from delivery.engine.plumbing import counters, redis_link


def stored(redis_conn) -> dict:
    return {key.decode(): int(value) for key, value in redis_conn.hgetall(counters.COUNTERS).items()}


def test_counts_are_tallied_then_added_in_one_flush(redis_conn):
    for _ in range(100):  # a hundred recorded batches or publishes
        counters.add(Counter({counters.field("messages_published"): 2}))
    counters.add({counters.field("attempts", "success", "", "deliveries"): 3},
                 {"attempt_duration_seconds": [0.004, 0.2, 99]})
    counters.flush()  # (the process's flusher thread may have added part of it already: the sums are the same)
    assert stored(redis_conn) == {"messages_published": 200, "attempts|success||deliveries": 3}
    _, histograms = counters.read()
    assert histograms["attempt_duration_seconds"]["buckets"][0] == (0.005, 1)
    assert histograms["attempt_duration_seconds"]["buckets"][-1] == ("+Inf", 3)
    counters.flush()  # an empty tally writes nothing
    assert stored(redis_conn)["messages_published"] == 200


def test_a_tally_redis_did_not_take_is_kept_for_the_next_flush(redis_conn, monkeypatch):
    counters.add({counters.field("messages_published"): 5})

    def away(*args, **kwargs):
        raise RedisConnectionError("Redis is away")

    with monkeypatch.context() as patched:
        patched.setattr(redis_link, "connection", away)
        counters.flush()  # never raises
        counters.add({counters.field("messages_published"): 1})
    counters.flush()
    assert stored(redis_conn) == {"messages_published": 6}


@pytest.mark.django_db
def test_a_scrape_in_this_process_sees_its_own_tally(redis_conn):
    counters.add({counters.field("deliveries_created"): 4})
    found, _ = counters.read()
    assert found[("deliveries_created",)] == 4

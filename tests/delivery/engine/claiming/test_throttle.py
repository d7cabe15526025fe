"""An endpoint's rate limit (engine/claiming/throttle.py): one sliding window per subscription in Redis, shared by
every worker. (Rows deferred by it: tests/delivery/engine/sending/test_attempts.py.)"""

import pytest

from delivery.engine.claiming import throttle


def test_throttle_script_grants_the_rate_and_says_when_the_next_slot_frees(redis_conn):
    assert throttle.acquire(7, rate=3, wanted=5, token="a") == (3, pytest.approx(throttle.WINDOW_SECONDS, abs=0.05))
    granted, wait = throttle.acquire(7, rate=3, wanted=1, token="b")
    assert granted == 0 and 0 < wait <= throttle.WINDOW_SECONDS
    assert throttle.acquire(8, rate=3, wanted=1, token="c")[0] == 1  # another subscription has its own window

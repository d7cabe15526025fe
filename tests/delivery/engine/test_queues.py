"""Asking for pumps and waking the scheduler (delivery/engine/queues.py, wakeup.py) on their own, against a real
Redis: one pump waits per queue however many ask, a started pump lets the next ask queue another, a wake-up is one
element however many wake, and a lost Redis costs a log line, not an exception."""

import pytest
import redis

from delivery.engine import dispatch, queues, redis_link, wakeup

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_pump_waits_per_queue_however_many_ask(redis_conn):
    asked = [queues.want_pump("deliveries") for _ in range(20)]
    assert asked.count(True) == 1
    assert redis_link.queue("deliveries").count == 1
    sequence = queues.work_sequence("deliveries")
    assert sequence == 20  # every ask tells running pumps that work came
    queues.pump_started("deliveries")
    assert queues.want_pump("deliveries") is True  # the waiting one started: the next ask queues another
    assert queues.want_pump("retries") is True  # each queue has its own


def test_a_wake_up_is_one_element_however_many_wake(redis_conn):
    for _ in range(5):
        wakeup.wake_scheduler()
    assert redis_conn.llen(wakeup.WAKE_KEY) == 1
    dispatch.sleep_until_due(5)  # woken at once: the element is there
    assert redis_conn.llen(wakeup.WAKE_KEY) == 0


def test_without_redis_asking_and_waking_only_log(monkeypatch, caplog, redis_conn):
    gone = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    monkeypatch.setattr(redis_link, "connection", lambda name: gone)
    monkeypatch.setattr(redis_link, "queue", lambda name: type("Q", (), {"connection": gone})())
    assert queues.want_pump("deliveries") is False
    wakeup.wake_scheduler()
    assert queues.work_sequence("deliveries") == -1
    assert "waiting for Redis" in caplog.text or "could not" in caplog.text

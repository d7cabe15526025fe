"""Asking for pumps and waking the scheduler (engine/plumbing/queues.py) on their own, against a real
Redis: one pump waits per queue however many ask, a started pump lets the next ask queue another, a wake-up is one
element however many wake, and a lost Redis costs a log line, not an exception."""

import threading
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone
from redis.backoff import NoBackoff
from redis.retry import Retry

from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.intake.publishing import message_publish
from delivery.engine.plumbing import queues, redis_link
from delivery.engine.scheduler import dispatch
from delivery.models import Delivery

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_pump_waits_per_queue_however_many_ask(redis_conn):
    asked = [queues.want_pump("deliveries") for _ in range(20)]
    assert asked.count(True) == 1
    assert redis_link.queue("deliveries").count == 1
    sequence = queues.work_sequence("deliveries")
    assert sequence == 20  # every ask tells running pumps that work came
    redis_conn.delete(queues.PUMP_WANTED_KEY.format("deliveries"))  # its flag ran out, it is still queued
    assert queues.want_pump("deliveries") is False and redis_link.queue("deliveries").count == 1
    redis_link.queue("deliveries").pop_job_id()  # a worker takes it
    queues.pump_started("deliveries")
    assert queues.want_pump("deliveries") is True  # the waiting one started: the next ask queues another
    assert queues.want_pump("retries") is True  # each queue has its own
    assert [redis_link.queue_key(name) for name in ("deliveries", "retries")] == [
        redis_link.queue(name).key for name in ("deliveries", "retries")]  # the list it counts is the queue's


def test_a_wake_up_is_one_element_however_many_wake(redis_conn):
    for _ in range(5):
        queues.wake_scheduler()
    assert redis_conn.llen(queues.WAKE_KEY) == 1
    dispatch.sleep_until_due(5)  # woken at once: the element is there
    assert redis_conn.llen(queues.WAKE_KEY) == 0


def test_one_pump_takes_the_look_at_announced_work_for_the_gathering_time(redis_conn):
    """In a stream of publishes the first lingering pump to ask gathers them and claims; the others leave the work
    to it for that long, then the next wake is anyone's again. Each queue has its own."""
    assert queues.take_look("deliveries", 200) is True
    assert queues.take_look("deliveries", 200) is False
    assert queues.take_look("retries", 200) is True
    ttl = redis_conn.pttl(queues.LOOKING_KEY.format("deliveries"))
    assert 0 < ttl <= 200  # then it is anyone's: a pump that died while gathering holds nothing longer
    redis_conn.delete(queues.LOOKING_KEY.format("deliveries"))
    assert queues.take_look("deliveries", 200) is True


def test_without_redis_asking_and_waking_only_log(monkeypatch, caplog, redis_conn):
    gone = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    monkeypatch.setattr(redis_link, "connection", lambda name: gone)
    monkeypatch.setattr(redis_link, "queue", lambda name: type("Q", (), {"connection": gone})())
    assert queues.want_pump("deliveries") is False
    queues.wake_scheduler()
    assert queues.work_sequence("deliveries") == -1
    assert queues.take_look("deliveries", 15) is True  # every pump looks: nothing waits for a lost flag
    assert "waiting for Redis" in caplog.text or "could not" in caplog.text


def test_a_retry_that_fell_due_during_the_tick_ends_the_schedulers_sleep_at_once(user, redis_conn, monkeypatch):
    """A retry due between the tick's dispatch and its sleep was dispatched by nobody: sleeping until the next
    retry due after *now* (or the whole interval) would send it a tick late."""

    topic, _ = topic_create(owner=user, name="late")
    subscription_create(topic=topic, endpoint="http://127.0.0.1:9/hook")
    message_publish(topic=topic, payload={})
    now = timezone.now()
    Delivery.objects.update(next_attempt_at=now - timedelta(milliseconds=50))  # fell due after the dispatch
    slept = []
    monkeypatch.setattr(dispatch.time, "sleep", slept.append)
    blocking = type("Redis", (), {"blpop": lambda self, keys, timeout: slept.append(timeout)})()
    monkeypatch.setattr(dispatch, "redis", lambda: blocking)

    dispatch.sleep_until_due(1.0, dispatched_at=now - timedelta(milliseconds=100))
    assert slept == []  # back at once: the next tick dispatches it

    dispatch.sleep_until_due(1.0, dispatched_at=now)  # dispatched already: the pumps' business
    assert slept and max(slept) > 0.5


def test_an_announcement_wakes_one_waiting_pump_and_is_one_element_however_many_announce(redis_conn):
    """A lingering pump blocks on the announcements instead of polling the work sequence; an announcement made
    before it waits ends the wait at once, and many leave one element, which wakes one waiter."""
    for _ in range(5):
        queues.want_pump("deliveries")
    assert redis_conn.llen(queues.PUMP_WAKE_KEY) == 1
    began = time.monotonic()
    assert queues.await_work("deliveries", 5) is True
    assert time.monotonic() - began < 2  # woken at once (5 s without the element)
    assert redis_conn.llen(queues.PUMP_WAKE_KEY) == 0
    queues.pass_wake("deliveries")  # a wake put back wakes the next waiter
    assert queues.await_work("deliveries", 5) is True
    woken = []
    waiters = [threading.Thread(target=lambda: (queues.await_work("deliveries", 3), woken.append(time.monotonic())))
               for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.3)  # both wait
    announced = time.monotonic()
    queues.want_pump("deliveries")
    for waiter in waiters:
        waiter.join(10)
    assert len(woken) == 2
    assert min(woken) - announced < 1.5 <= max(woken) - announced  # one woken by it, the other at its timeout


def test_without_redis_a_pump_waiting_for_work_sleeps_briefly(monkeypatch):
    gone = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    monkeypatch.setattr(redis_link, "connection", lambda name: gone)
    began = time.monotonic()
    assert queues.await_work("deliveries", 5) is False
    assert time.monotonic() - began < 2  # the connection refused at once, then a short sleep; never an exception
    queues.pass_wake("deliveries")  # nor here

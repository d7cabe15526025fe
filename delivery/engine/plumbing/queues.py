"""Putting work on the RQ queues.

Workers pull: a `pump` job takes whatever is due from the database, in bulk, for as long as there is any (see
`pump.py`), so the unit of work follows what is due, not how publishes happened to arrive. A queue needs at most one
pump waiting on it: `want_pump` enqueues one only when none is waiting (a Redis flag a starting pump clears), so a
stream of publishes costs one Redis round trip each and queues no job per publish. Lost pumps (Redis flushed, a
worker killed before starting one) cost nothing: the flag expires and the scheduler asks again for due work.

`deliver` jobs carry ids: a retry asked for by hand, sent at once and recorded as `manual`.

Waking the scheduler (`herald_cron`): a one-element Redis list it blocks on while it sleeps until the next due
time. Rows due now never need it (they ask for a pump); rows due sooner than it planned do.
"""

import logging
import time

from redis.exceptions import RedisError

from delivery.conf import herald
from delivery.engine.plumbing import availability, redis_link
from delivery.engine.plumbing.database import after_commit
from delivery.rules.vocabulary import AttemptQueue

log = logging.getLogger(__name__)
DELIVERIES, RETRIES = AttemptQueue.DELIVERIES, AttemptQueue.RETRIES
PUMP_WANTED_KEY = "herald:pump-wanted:{}"
WORK_SEQUENCE_KEY = "herald:work-sequence"
LOOKING_KEY = "herald:looking:{}"  # a pump gathers the work announced on a queue before it claims (`take_look`)
# A one-element list that lingering pumps block on (`await_work`): each announcement leaves the element, which wakes
# one of them.
PUMP_WAKE_KEY = "herald:pump-wake"
# By name: the jobs' module imports this one.
PUMP_JOB, DELIVER_JOB = "delivery.engine.sending.jobs.pump", "delivery.engine.sending.jobs.deliver"
PUMP_WANTED_SECONDS = 5  # after this a waiting pump counts as lost and another may be queued
REDIS_LOST_WAIT_SECONDS = 0.01  # how long `await_work` sleeps instead, without Redis


def refill(pipe, key: str):
    """A wake-up list's one element, put back in `pipe`: however many wake, one element, which wakes one waiter."""
    return pipe.lpush(key, 1).ltrim(key, 0, 0)


def want_pump(queue_name: str = DELIVERIES) -> bool:
    """New work is due: tell running pumps (the work sequence moves on) and make sure a pump is waiting on
    `queue_name`. One Redis round trip, plus an enqueue only when no pump is waiting. Never raises: without Redis
    the work stays due in the database and the scheduler asks again. Returns whether it queued a pump."""
    try:
        # Not a MULTI: each command stands alone, and a transaction doubled what the web parsed per publish.
        with redis_link.connection(queue_name).pipeline(transaction=False) as pipe:
            pipe.incr(WORK_SEQUENCE_KEY)
            refill(pipe, PUMP_WAKE_KEY)  # (after the sequence moved: a woken pump sees it)
            pipe.set(PUMP_WANTED_KEY.format(queue_name), 1, nx=True, ex=PUMP_WANTED_SECONDS)
            pipe.llen(redis_link.queue_key(queue_name))
            *_, queued_now, waiting = pipe.execute()
        # One is waiting already: flagged, or still in the queue's list after its flag ran out (the workers busy
        # with running pumps, which take the new work themselves). Queued on the flag alone, a steady stream that
        # kept both workers' pumps running queued one more every PUMP_WANTED_SECONDS, none of them ever started:
        # 222 after 20 minutes (bench/soak.py). A job lost with Redis's data is not in the list either.
        if not queued_now or waiting:
            return False
        redis_link.queue(queue_name).enqueue_call(PUMP_JOB, args=(str(queue_name),),
                                                  timeout=herald.JOB_TIMEOUT_SECONDS, result_ttl=0, failure_ttl=86400)
        return True
    except Exception as exc:
        availability.redis_failed(exc, log, "could not queue a delivery pump on %s; the scheduler will ask again",
                                  queue_name)
        return False


def pump_started(queue_name: str) -> None:
    """A pump took over: the next new work needs a new one queued (this one may be busy with slow endpoints)."""
    try:
        redis_link.connection(queue_name).delete(PUMP_WANTED_KEY.format(queue_name))
    except Exception as exc:
        availability.redis_failed(exc, log, "could not clear the pump flag of %s", queue_name)


def work_sequence(queue_name: str = DELIVERIES) -> int:
    """A number that changes whenever new work is announced; a pump compares it with what it saw last."""
    try:
        return int(redis_link.connection(queue_name).get(WORK_SEQUENCE_KEY) or 0)
    except Exception:
        return -1


def await_work(queue_name: str, seconds: float) -> bool:
    """Wait up to `seconds` (to about 0.1 s more: Redis times blocking pops by its own clock) for work to be
    announced; whether an announcement woke it. An announcement wakes one waiting pump, and one made since the last
    wait ends the next at once; without Redis, a short sleep. The caller reads the work sequence after: a wake may
    be for work it has seen already."""
    try:
        return redis_link.connection(queue_name).blpop([PUMP_WAKE_KEY], timeout=max(seconds, 0.01)) is not None
    except (RedisError, OSError) as exc:
        availability.redis_failed(exc, log, "could not wait for announced work on %s", queue_name)
        time.sleep(min(seconds, REDIS_LOST_WAIT_SECONDS))
        return False


def pass_wake(queue_name: str) -> None:
    """Put back a wake this pump took and will not act on (its worker is stopping): another lingering pump is woken
    by it instead of finding the work at its next look."""
    try:
        with redis_link.connection(queue_name).pipeline(transaction=False) as pipe:
            refill(pipe, PUMP_WAKE_KEY).execute()
    except (RedisError, OSError) as exc:
        availability.redis_failed(exc, log, "could not pass a wake on %s", queue_name)


def take_look(queue_name: str, milliseconds: int) -> bool:
    """Whether this pump is the one to claim the work announced now, after gathering for `milliseconds`: the first
    pump to ask is, and the others leave it that long (each claimed for every lone publish before, all but one of
    them for nothing). Without Redis, every pump is."""
    try:
        return bool(redis_link.connection(queue_name).set(LOOKING_KEY.format(queue_name), 1, nx=True,
                                                          px=max(1, milliseconds)))
    except Exception:
        return True


def pump_after_commit(queue_name: str = DELIVERIES) -> None:
    """Call inside the transaction that made rows due; the pump is asked for once it commits."""
    after_commit(want_pump, queue_name)


def send_now_after_commit(delivery_ids: list[int], label: str) -> None:
    """A `deliver` job for these rows once the transaction commits (a retry by hand). If it is lost, the rows are
    due anyway and the next pump sends them."""
    def push():
        try:
            redis_link.queue(DELIVERIES).enqueue_call(
                DELIVER_JOB, args=(delivery_ids, str(label)), timeout=herald.JOB_TIMEOUT_SECONDS,
                result_ttl=0, failure_ttl=86400)
        except Exception as exc:
            availability.redis_failed(exc, log, "could not queue deliveries %s; the next pump sends them",
                                      delivery_ids)
            want_pump(DELIVERIES)
    after_commit(push)


# --- waking the scheduler --------------------------------------------------------------------------------------------

WAKE_KEY = "herald:scheduler:wake"


def redis():
    """The connection the scheduler waits on."""
    return redis_link.connection(RETRIES)


def wake_scheduler() -> None:
    """Tell a sleeping scheduler that a delivery may now be due sooner than it planned."""
    try:
        with redis().pipeline() as pipe:
            refill(pipe, WAKE_KEY).execute()
    except Exception as exc:  # the scheduler also wakes by itself every interval
        availability.redis_failed(exc, log, "could not wake the scheduler")


def wake_scheduler_after_commit() -> None:
    """Call inside the transaction that scheduled rows; the scheduler is woken once it commits."""
    after_commit(wake_scheduler)

"""The RQ worker Herald runs (`manage.py rqworker deliveries retries` picks it up from settings, and so does a host
project that names it in `RQ["WORKER_CLASS"]`).

A plain `SimpleWorker` has habits a long-lived delivery worker cannot have:
- it needs Redis the moment it is built (it names its connection) and when it registers, so started while Redis is
  down it exits with "Connection refused". Here it waits for Redis there, and for PostgreSQL and Redis before its
  loop begins (`availability.wait`: one log line per change of state, capped backoff);
- it keeps Django's database connection across jobs, so after a PostgreSQL restart every later job fails with
  "the connection is closed". Here, as Django does around every request, broken and expired connections are
  dropped before and after every job, and a job starts only once PostgreSQL answers (the worker waits, keeping its
  heartbeat, instead of failing the job);
- its work loop ends the process on any Redis error outside the dequeue wait (a heartbeat or a job's bookkeeping
  while Redis restarts). Here the loop starts again, under a fresh worker name, once Redis answers.
It stops only when asked to (SIGTERM/SIGINT), in burst mode when the queues are empty, or after `max_jobs`.
"""

import logging
import signal
import time
from functools import cached_property
from uuid import uuid4

from django.db import close_old_connections
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.exceptions import StopRequested
from rq.worker import SimpleWorker

from delivery import heap, heartbeat
from delivery.conf import herald
from delivery.engine.plumbing import availability, counters
from delivery.engine.sending import handover, journal, pump
from delivery.transport import sender

log = logging.getLogger("herald.worker")


class _QuietAboutRedis(logging.Filter):
    """RQ logs an error on every retry of its dequeue while Redis is away; `availability` says it once instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "could not connect to Redis instance" not in str(record.msg)


logging.getLogger("rq.worker").addFilter(_QuietAboutRedis())


class Companions:
    """What a worker runs beside its jobs, started together as it begins work and stopped together as it ends: its
    heartbeat, the transport (its event loop's thread and name lookups, sized to the process's descriptors), the
    journal's writer, the operators' counters' tally, and the recorder of sends handed over between pumps. Stopping
    records what pumps handed over (waiting for their answers), writes what the journal holds (JOURNAL_SECONDS at
    most), adds the last tally to Redis and closes the transport; none of it raises."""

    JOURNAL_SECONDS = 5.0

    def __init__(self):
        self.beat: heartbeat.WorkerBeat | None = None
        self.transport = None

    def start(self, worker_name: str) -> "Companions":
        self.beat = heartbeat.WorkerBeat().start()  # `manage.py herald_alive --worker`
        log.info("worker %s: send budget %s", worker_name, sender.process_budget())
        self.transport = sender.transport()
        journal.start()
        counters.buffer()  # a tally added once a second, not a pipeline per batch
        handover.handed_over.start()
        return self

    def stop(self) -> None:
        handover.settle()  # sends a pump handed over and nothing recorded yet (never raises)
        if not journal.flush(timeout=self.JOURNAL_SECONDS):
            log.warning("answers not journaled before the worker stopped; their sends may be repeated (at least once)")
        counters.flush(timeout=counters.WAIT_FOR_A_FLUSH_SECONDS)
        try:
            sender.close_transport()
        except Exception:
            log.exception("the transport did not close cleanly")
        if self.beat is not None:
            self.beat.stop()


class HeraldWorker(SimpleWorker):
    max_connection_wait_time = availability.MAX_BACKOFF_SECONDS  # RQ's own dequeue retry, capped as ours
    _stop_asked = False
    _finished = False  # a normal end of the loop: queues empty in burst mode, idle too long, or max_jobs done
    _jobs_done = 0
    _max_jobs: int | None = None
    _beat: heartbeat.WorkerBeat | None = None

    def _set_ip_address(self, connection):
        """Called while the worker is built: the first moment it needs Redis. Wait for it (and PostgreSQL, which its
        jobs need) instead of failing."""
        asked = lambda *_: setattr(self, "_stop_asked", True)  # noqa: E731 (RQ installs its own handlers later)
        previous = {sig: signal.signal(sig, asked) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            beating = lambda: heartbeat.beat(heartbeat.WORKER)  # noqa: E731 (alive while it waits: herald_alive)
            while availability.wait(self.dependencies(), stopping=self.stop_asked, while_waiting=beating):
                try:
                    return super()._set_ip_address(connection)
                except (RedisConnectionError, RedisTimeoutError):
                    continue  # gone again between the look and the call: wait once more
            self.ip_address = "unknown"  # asked to stop before Redis came back: work() returns at once
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop_asked(self) -> bool:
        return self._stop_asked

    def request_stop(self, signum, frame):
        self._stop_asked = True
        pump.stopping.set()  # a running pump stops claiming, finishes what is in flight and returns
        super().request_stop(signum, frame)

    def set_shutdown_requested_date(self):
        """RQ writes this from the SIGTERM handler: a Redis error here would be raised into whatever the worker was
        doing (a pump mid-claim, its sends then unrecorded). It is bookkeeping; the stop itself needs no Redis."""
        try:
            super().set_shutdown_requested_date()
        except (RedisConnectionError, RedisTimeoutError):
            log.info("worker %s: stopping; could not note it in Redis", self.name)

    def heartbeat(self, timeout=None, pipeline=None):
        """The first Redis call of every round of RQ's loop: while Redis is away, wait here (and say so once)."""
        if pipeline is not None:
            return super().heartbeat(timeout, pipeline)
        while True:
            try:
                result = super().heartbeat(timeout, pipeline)
                if availability.is_down(self.redis_dependency.name):
                    availability.unreachable([self.redis_dependency])  # logs that it answers again
                return result
            except (RedisConnectionError, RedisTimeoutError):
                if not availability.wait([self.redis_dependency], stopping=self.stop_asked):
                    raise StopRequested() from None

    def heartbeat_once(self):
        super().heartbeat()

    @cached_property
    def redis_dependency(self) -> availability.Dependency:
        """Redis as this worker reaches it (its own connection, set before RQ first needs it)."""
        return availability.redis_dependency(self.connection)

    def dependencies(self) -> list[availability.Dependency]:
        return [availability.DATABASE, self.redis_dependency]

    def execute_job(self, job, queue):
        close_old_connections()
        if self._beat is not None:
            self._beat.job_since = time.monotonic()
        # A job needs PostgreSQL: wait for it here (heartbeat kept) rather than fail the job and spin on the next.
        if not availability.wait([availability.DATABASE], stopping=self.stop_asked, while_waiting=self.heartbeat_once):
            raise StopRequested()
        try:
            super().execute_job(job, queue)
        finally:
            close_old_connections()
            if self._beat is not None:
                self._beat.job_since = None
            self._jobs_done += 1
            if self._max_jobs is not None and self._jobs_done >= self._max_jobs:
                self._finished = True

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        if result is None:
            self._finished = True
        return result

    def work(self, burst: bool = False, *args, max_jobs: int | None = None, **kwargs) -> bool:
        self._max_jobs = max_jobs
        kwargs["logging_level"] = herald.RQ_LOG_LEVEL  # rqworker asks for INFO: a line per job
        self._install_signal_handlers()  # a stop asked while waiting for a dependency is a stop
        companions = Companions().start(self.name)
        self._beat = companions.beat
        heap.settle()  # what start-up built is not the collector's to walk again (delivery/heap.py)
        try:
            return self._work_until_asked(burst, *args, max_jobs=max_jobs, **kwargs)
        finally:
            companions.stop()

    def _work_until_asked(self, burst: bool, *args, max_jobs: int | None = None, **kwargs) -> bool:
        worked = False
        while True:
            try:
                if not availability.wait(self.dependencies(), stopping=self.stop_asked):
                    return worked
                worked = super().work(burst, *args, max_jobs=max_jobs, **kwargs) or worked
            except StopRequested:  # asked to stop while waiting, outside RQ's loop
                return worked
            except (RedisConnectionError, RedisTimeoutError) as exc:  # registering, or its teardown, lost Redis
                log.warning("worker %s lost Redis outside its loop: %s", self.name, exc)
            if burst or self._stop_asked or self._finished:
                return worked
            log.warning("worker %s: its loop ended on an error (see above); starting again once PostgreSQL and "
                        "Redis answer", self.name)
            self.name = uuid4().hex  # the old registration may be half torn down; start clean

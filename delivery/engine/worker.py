"""The RQ worker Herald runs (`manage.py rqworker deliveries retries` picks it up from settings).

A plain `SimpleWorker` has two habits a long-lived delivery worker cannot have:
- it keeps Django's database connection across jobs, so after a PostgreSQL restart every later job fails with
  "the connection is closed". Here, as Django does around every request, broken and expired connections are
  dropped before and after every job (with CONN_HEALTH_CHECKS, a reused connection is pinged first);
- its work loop ends the process on any Redis error outside the dequeue wait (a heartbeat or a job's bookkeeping
  while Redis restarts). Here the loop starts again, under a fresh worker name, once Redis answers.
It stops only when asked to (SIGTERM/SIGINT), in burst mode when the queues are empty, or after `max_jobs`.
"""

import logging
import time
from uuid import uuid4

from django.db import close_old_connections
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.worker import SimpleWorker

from delivery.conf import herald
from delivery.engine import pump

log = logging.getLogger("herald.worker")
RECONNECT_WAIT_MAX = 10.0


class HeraldWorker(SimpleWorker):
    _stop_asked = False
    _finished = False  # a normal end of the loop: queues empty in burst mode, idle too long, or max_jobs done
    _jobs_done = 0
    _max_jobs: int | None = None

    def request_stop(self, signum, frame):
        self._stop_asked = True
        pump.stopping.set()  # a running pump stops claiming, finishes what is in flight and returns
        super().request_stop(signum, frame)

    def execute_job(self, job, queue):
        close_old_connections()
        try:
            super().execute_job(job, queue)
        finally:
            close_old_connections()
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

        worked = False
        while True:
            try:
                worked = super().work(burst, *args, max_jobs=max_jobs, **kwargs) or worked
            except (RedisConnectionError, RedisTimeoutError):  # its teardown could not reach Redis either
                log.warning("worker %s lost Redis while stopping its loop", self.name)
            if burst or self._stop_asked or self._finished:
                return worked
            log.warning("worker %s: its loop ended on an error (see above); starting again once Redis answers",
                        self.name)
            self.wait_for_redis()
            if self._stop_asked:
                return worked
            self.name = uuid4().hex  # the old registration may be half torn down; start clean

    def wait_for_redis(self) -> None:
        wait = 0.5
        while not self._stop_asked:
            try:
                self.connection.ping()
                return
            except (RedisConnectionError, RedisTimeoutError):
                time.sleep(wait)
                wait = min(wait * 2, RECONNECT_WAIT_MAX)

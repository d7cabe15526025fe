"""Waiting for PostgreSQL and Redis: what every long-lived process does whenever it cannot reach one of them.

The worker (however it is started: `HeraldWorker` is the class, not a wrapper command), the scheduler and the web
server's start-up call `wait()` before they begin and again whenever work fails because a dependency went away. It
returns once everything answers, or False as soon as `stopping()` says the process was asked to stop (SIGTERM or
SIGINT), so a process never exits on its own because PostgreSQL restarts or Redis is briefly down.

Each dependency's state change is one log line, not one per retry: "waiting for Redis at 127.0.0.1:6379/0
(Error 111 …)" when it stops answering, "Redis at 127.0.0.1:6379/0 answers again after 12.3 s" when it is back.
Retries back off from half a second up to `MAX_BACKOFF_SECONDS`. Addresses are logged without user or password.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import InterfaceError, OperationalError, connection
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import MasterNotFoundError

from delivery.engine.plumbing import redis_link

log = logging.getLogger("herald.availability")
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
STOP_CHECK_SECONDS = 0.1  # while backing off, how often a stop request is noticed

# The errors that mean "a dependency is unreachable" rather than "this code is wrong".
OUTAGE_ERRORS = (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError, ConnectionError,
                 TimeoutError)


@dataclass(frozen=True)
class Dependency:
    name: str
    where: Callable[[], str]
    check: Callable[[], None]  # raises when unreachable

    def describe(self) -> str:
        try:
            return f"{self.name} at {self.where()}"
        except Exception:  # naming the address must never be what fails
            return self.name


def _database_address() -> str:
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return str(settings["NAME"])
    hosts = str(settings.get("HOST") or "local socket").split(",")
    ports = str(settings.get("PORT") or 5432).split(",")
    ports += ports[-1:] * (len(hosts) - len(ports))  # libpq: one port for every host, or one each
    return f"{','.join(f'{h}:{p}' for h, p in zip(hosts, ports, strict=False))}/{settings.get('NAME')}"


def _check_database() -> None:
    try:
        connection.close_if_unusable_or_obsolete()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        connection.close()  # the next look connects anew
        raise


def redis_address(client: Redis) -> str:
    pool = client.connection_pool
    if getattr(pool, "service_name", None):  # a SentinelConnectionPool: the primary is whichever Sentinel names
        asked = ",".join("{host}:{port}".format(**s.connection_pool.connection_kwargs)
                         for s in pool.sentinel_manager.sentinels)
        return f"the primary of {pool.service_name!r} via Sentinel {asked}, db {pool.connection_kwargs.get('db', 0)}"
    kwargs = pool.connection_kwargs
    if kwargs.get("path"):
        return f"{kwargs['path']}/{kwargs.get('db', 0)}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def redis_dependency(client: Redis | None = None) -> Dependency:
    """Redis as reached through `client` (the worker's own), else through Herald's kept client."""
    def get() -> Redis:
        return client if client is not None else redis_link.connection()

    return Dependency("Redis", lambda: redis_address(get()), lambda: get().ping())


DATABASE = Dependency("PostgreSQL", _database_address, _check_database)
REDIS = redis_dependency()
ALL = (DATABASE, REDIS)

_down_since: dict[str, float] = {}  # dependency name -> monotonic time it was first seen unreachable
_lock = threading.Lock()


def _mark(dependency: Dependency, error: BaseException | None) -> None:
    """Record what a look found; log only a change of state."""
    with _lock:
        since = _down_since.get(dependency.name)
        if error is not None and since is None:
            _down_since[dependency.name] = time.monotonic()
            log.warning("waiting for %s (%s); retrying with backoff up to %g s", dependency.describe(),
                        _one_line(error), MAX_BACKOFF_SECONDS)
        elif error is None and since is not None:
            del _down_since[dependency.name]
            log.warning("%s answers again after %.1f s", dependency.describe(), time.monotonic() - since)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, MasterNotFoundError):  # "No master found for 'herald' : <every sentinel client's repr>"
        text = text.split(" : ")[0] + " (no sentinel answered, or none names a primary)"
    return text[:300]


def unreachable(dependencies=ALL) -> list[Dependency]:
    """The dependencies that do not answer now (each look is recorded: a change of state is logged)."""
    missing = []
    for dependency in dependencies:
        try:
            dependency.check()
        except Exception as exc:
            _mark(dependency, exc)
            missing.append(dependency)
        else:
            _mark(dependency, None)
    return missing


def is_down(name: str) -> bool:
    return name in _down_since


def anything_down() -> bool:
    return bool(_down_since)


def redis_failed(error: BaseException, logger: logging.Logger, what: str, *args) -> None:
    """A Redis call failed on a path that goes on without it (the database holds the work). An outage is said once,
    as "waiting for Redis", until a look finds it back; anything else is logged with its traceback."""
    if is_outage(error):
        _mark(REDIS, error)
    else:
        logger.warning(what, *args, exc_info=error)


def wait(dependencies=ALL, *, stopping: Callable[[], bool] = lambda: False,
         while_waiting: Callable[[], None] | None = None, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Block until every dependency answers (True) or the process is asked to stop (False). `while_waiting` runs
    between looks (a worker keeps its heartbeat); what it raises is ignored."""
    backoff = FIRST_BACKOFF_SECONDS
    while not stopping():
        if not unreachable(dependencies):
            return True
        if while_waiting is not None:
            try:
                while_waiting()
            except Exception:  # best effort: it may need the very dependency that is away
                pass
        until = time.monotonic() + backoff
        while not stopping() and time.monotonic() < until:
            sleep(min(STOP_CHECK_SECONDS, max(0.0, until - time.monotonic())))
        backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
    return False


def is_outage(error: BaseException) -> bool:
    """Whether an error looks like a dependency going away (then `wait()` is the answer, not a traceback)."""
    return isinstance(error, OUTAGE_ERRORS)

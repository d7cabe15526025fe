"""Where Herald's Redis is: one server (`REDIS_URL`), or a primary that Redis Sentinel names (`REDIS_SENTINELS`).

    REDIS_URL=redis://10.0.0.5:6379/0                    # one Redis
    REDIS_SENTINELS=10.0.0.7:26379,10.0.0.8:26379,10.0.0.9:26379
    REDIS_SENTINEL_MASTER=herald                         # the name the sentinels monitor (default: herald)
    REDIS_DB=0  REDIS_PASSWORD=…  REDIS_SENTINEL_PASSWORD=…   # optional

With sentinels, every Redis client Herald makes (the RQ queues, the scheduler's wake-up, the OAuth token cache, the
API's rate limits through Django's cache) asks the sentinels for the current primary when it connects, and a client
still connected to a primary that became a replica drops that connection ("READONLY" becomes a connection error)
and asks again. A failover is therefore an outage of a few seconds to every process: it waits as for any Redis
outage (`delivery.engine.plumbing.availability`) and goes on by itself. Redis holds no delivery: what a failover loses
(writes the replica had not received) is found again in PostgreSQL by the scheduler (docs/deployment.md).

`rq_queues()` and `cache()` build the settings; a host project may call them or write the same dictionaries.
"""

from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured
from redis.sentinel import Sentinel, SentinelManagedConnection

QUEUES = ("deliveries", "retries")
DEFAULT_MASTER = "herald"
SOCKET_TIMEOUT_SECONDS = 30  # a Redis that went silent (a partition, a kill without RST) is left after this
SENTINEL_TIMEOUT_SECONDS = 1.0  # a sentinel that does not answer is skipped for the next after this


class SentinelConnection(SentinelManagedConnection):
    """redis-py's connection to a Sentinel-named primary, closed when a read is interrupted, as a plain connection
    is. redis-py's own keeps it (its `read_response` defaults `disconnect_on_error` to False): a worker asked to
    stop in the middle of its blocking pop then sent its goodbye on the connection the server was still blocking,
    and waited out the pop's timeout (minutes) instead of exiting."""

    def read_response(self, disable_decoding=False, *, disconnect_on_error=True, **kwargs):
        return super().read_response(disable_decoding, disconnect_on_error=disconnect_on_error, **kwargs)


def sentinels(environ: Mapping[str, str]) -> list[tuple[str, int]]:
    """`REDIS_SENTINELS` as (host, port) pairs; empty when Herald uses one Redis."""
    pairs = []
    for item in (environ.get("REDIS_SENTINELS") or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ImproperlyConfigured(f"REDIS_SENTINELS: {item!r} is not host:port")
        pairs.append((host.strip("[]"), int(port)))
    return pairs


def _sentinel_connection(environ: Mapping[str, str]) -> dict:
    db = environ.get("REDIS_DB") or "0"
    if not db.isdigit():
        raise ImproperlyConfigured(f"REDIS_DB must be a number, not {db!r}")
    sentinel_kwargs = {"socket_timeout": SENTINEL_TIMEOUT_SECONDS, "socket_connect_timeout": SENTINEL_TIMEOUT_SECONDS}
    if environ.get("REDIS_SENTINEL_PASSWORD"):
        sentinel_kwargs["password"] = environ["REDIS_SENTINEL_PASSWORD"]
    return {"SENTINELS": sentinels(environ), "MASTER_NAME": environ.get("REDIS_SENTINEL_MASTER") or DEFAULT_MASTER,
            "DB": int(db), "PASSWORD": environ.get("REDIS_PASSWORD") or None,
            "SOCKET_TIMEOUT": SOCKET_TIMEOUT_SECONDS, "SENTINEL_KWARGS": sentinel_kwargs,
            "CONNECTION_KWARGS": {"socket_connect_timeout": SENTINEL_TIMEOUT_SECONDS * 2,
                                  "connection_class": SentinelConnection}}


def with_timeouts(redis_url: str) -> str:
    """`redis_url` with connect and read timeouts and TCP keepalive unless it sets them: without, a Redis behind a
    partition (packets dropped, no reset) holds a call until the kernel gives up, a quarter of an hour later. RQ
    raises a worker's read timeout above its blocking pop's by itself."""
    if not redis_url:
        return redis_url
    parts = urlsplit(redis_url)
    query = dict(parse_qsl(parts.query))
    for name, value in (("socket_connect_timeout", str(SENTINEL_TIMEOUT_SECONDS * 2)),
                        ("socket_timeout", str(SOCKET_TIMEOUT_SECONDS)), ("socket_keepalive", "true")):
        query.setdefault(name, value)
    return urlunsplit(parts._replace(query=urlencode(query)))


def rq_queues(environ: Mapping[str, str], redis_url: str) -> dict:
    """django-rq's RQ_QUEUES for Herald's two queues."""
    where = _sentinel_connection(environ) if sentinels(environ) else {"URL": with_timeouts(redis_url)}
    return {name: {**where, "DEFAULT_TIMEOUT": 300} for name in QUEUES}


def cache(environ: Mapping[str, str], redis_url: str) -> dict:
    """Django's CACHES["default"] on the same Redis (the API's rate limits are shared by every web process)."""
    entry = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": with_timeouts(redis_url),
             "KEY_PREFIX": "herald",
             "TIMEOUT": 300}
    if sentinels(environ):
        where = _sentinel_connection(environ)
        entry["LOCATION"] = f"redis-sentinel://{where['MASTER_NAME']}/{where['DB']}"  # named in errors only
        entry["OPTIONS"] = {"pool_class": "delivery.redis_config.SentinelCachePool", "sentinel": where}
    return entry


class SentinelCachePool:
    """For Django's RedisCache: `from_url` (what the cache calls) returns the pool of the primary Sentinel names."""

    @classmethod
    def from_url(cls, url: str, *, sentinel: dict, parser_class=None, **options):
        connection = {"db": sentinel["DB"], "password": sentinel["PASSWORD"],
                      "socket_timeout": sentinel["SOCKET_TIMEOUT"], **sentinel["CONNECTION_KWARGS"], **options}
        manager = Sentinel(sentinel["SENTINELS"], sentinel_kwargs=sentinel["SENTINEL_KWARGS"], **connection)
        return manager.master_for(sentinel["MASTER_NAME"]).connection_pool

"""Where Herald's PostgreSQL is: `DATABASE_URL`, one host or libpq's list of hosts to fail over between, and the
connection settings every Herald process needs there (docs/deployment.md).

    DATABASE_URL=postgres://herald@10.0.0.5:5432/herald
    DATABASE_URL=postgres://herald@db1:5432,db2:5432/herald?target_session_attrs=read-write
    DATABASE_POOLER=pgbouncer     # behind PgBouncer in transaction pooling mode

`database()` builds Django's `DATABASES["default"]`; a host project may call it or write the same dictionary.
"""

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

POOLERS = ("", "pgbouncer")
# A database behind a partition (packets dropped, no reset) would hold a query until the kernel gives up, a quarter
# of an hour later: TCP keepalives find a silent peer in ~25 s and tcp_user_timeout fails a write that is not
# acknowledged within 20 s, so the process waits and reconnects like after any outage. The URL's query overrides
# each (`?keepalives_idle=30`).
KEEPALIVES = (("keepalives", 1), ("keepalives_idle", 10), ("keepalives_interval", 5), ("keepalives_count", 3),
              ("tcp_user_timeout", 20000))
CONNECT_TIMEOUT_SECONDS = 5  # per host of a multi-host URL, unless the URL says
# Herald's own statements (its bound cursors: the claim, the write-back, the publish's lookups) are prepared
# server-side after this many uses on a connection, so PostgreSQL plans each once per connection instead of on every
# run: planning was two fifths of PostgreSQL's CPU per message at a steady rate (docs/benchmarks.md, "The steady
# rate, a third cheaper"). Django's own queries go through its client-side cursors, which psycopg never prepares.
PREPARE_AFTER_USES = 2
# ... and each is planned once: the plan made for a prepared statement's first run serves its later runs, whatever
# their values. With PostgreSQL's default (`auto`), the claim's reads, the lease and the write-back were planned
# anew on every run all the same, their arrays' sizes being unknown to a plan made for any values. Their plans do
# not depend on the values: each reads by key, by row address or along one index (engine/claiming/read_plans.py).
# It concerns statements whose values travel apart from them (Herald's bound cursors); Django's queries arrive
# with their values in their text and are planned for them, as before.
PLANNED_ONCE = "-c plan_cache_mode=force_generic_plan"
# Django's PostgreSQL backend, whose health check before a request's first statement asks the connection's socket
# instead of running `SELECT 1` when the socket has nothing to read and the connection was used within 2 s
# (delivery/postgresql/base.py): a round trip less per request in a steady stream.
HEALTH_CHECKED_ON_THE_SOCKET = "delivery.postgresql"


def database(url: str, *, pooler: str = "") -> dict:
    """Django's database settings for `url`, with what Herald needs on PostgreSQL (keepalives, prepared statements,
    a health check on the socket; behind PgBouncer, nothing that outlives a transaction) and on SQLite (a wait for
    the writer lock)."""
    pooler = pooler.strip().lower()
    if pooler not in POOLERS:
        raise ImproperlyConfigured(f"DATABASE_POOLER={pooler!r}: use 'pgbouncer' or leave it empty")
    config = database_from_url(url)
    if config["ENGINE"] == "django.db.backends.postgresql":
        config["ENGINE"] = HEALTH_CHECKED_ON_THE_SOCKET
        options = config.setdefault("OPTIONS", {})
        for name, value in KEEPALIVES:
            options.setdefault(name, value)
        options.setdefault("prepare_threshold", PREPARE_AFTER_USES)
        if pooler != "pgbouncer" and "plan_cache_mode" not in options.get("options", ""):
            options["options"] = f"{options.get('options', '')} {PLANNED_ONCE}".strip()
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # SQLite is the zero-setup local default: wait for the writer lock instead of failing at once.
        config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
        config["CONN_MAX_AGE"] = 0
    # Behind PgBouncer in transaction pooling mode, consecutive transactions of one connection may run on different
    # server sessions, so nothing may outlive a transaction there. Statements prepared server-side (PgBouncer 1.18,
    # Debian 12's, cannot route them): off, whatever OPTIONS say (Django 5.2 leaves them off unless OPTIONS set
    # prepare_threshold; psycopg's own default prepares after 5 uses); Django's server-side cursors for iterator()
    # outside a transaction: off. Herald's advisory locks are transaction-scoped already, and it sets nothing per
    # session.
    if pooler == "pgbouncer":
        config.setdefault("OPTIONS", {})["prepare_threshold"] = None
        config["DISABLE_SERVER_SIDE_CURSORS"] = True
    return config


def database_from_url(url: str) -> dict:
    """dj-database-url, plus libpq's multi-host form for a primary with replicas to fail over to:
    postgres://user@db1:5432,db2:5432/herald?target_session_attrs=read-write connects to whichever host accepts
    writes now (docs/deployment.md). Each host is tried for at most `connect_timeout` (5 s unless the URL says)."""
    scheme, separator, rest = url.partition("://")
    netloc = rest.split("/", 1)[0]
    hosts = netloc.rpartition("@")[2]
    if not separator or "," not in hosts or not scheme.startswith("postgres"):
        return dj_database_url.parse(url, conn_max_age=600, conn_health_checks=True)
    pairs = [_host_and_port(item) for item in hosts.split(",")]
    config = dj_database_url.parse(url.replace(hosts, "multi-host", 1), conn_max_age=600, conn_health_checks=True)
    config["HOST"] = ",".join(host for host, _ in pairs)
    config["PORT"] = ",".join(port for _, port in pairs)
    config.setdefault("OPTIONS", {}).setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    return config


def _host_and_port(item: str) -> tuple[str, str]:
    """'db1:6432' -> ('db1', '6432'); 'db1' and '[::1]' take PostgreSQL's port, 5432."""
    host, colon, port = item.rpartition(":")
    if not colon or "]" in port:
        host, port = item, "5432"
    if not host or not port.isdigit():
        raise ImproperlyConfigured(f"DATABASE_URL: {item!r} is not host[:port]")
    return host.strip("[]"), port

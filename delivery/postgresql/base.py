"""Django's PostgreSQL backend, whose connection health check asks the socket before it asks the server.

With `CONN_HEALTH_CHECKS` (Herald's processes keep their connections: `delivery.db_config.database()`), Django runs
`SELECT 1` before the first statement of each request: a round trip, and the web process's and PostgreSQL's CPU
for it, on every publish. A connection the server has ended (a restart, `pg_terminate_backend`, an idle timeout, a
crash the kernel saw) has the server's goodbye, or the end of the stream, waiting on its socket. So: a connection
used within the last TRUSTED_FOR_SECONDS, open and idle, whose socket has nothing to read is taken as usable
without a statement; anything else (something to read, a transaction not idle, a connection unused for longer, a
socket psycopg cannot give) is asked `SELECT 1` as before.

What the socket cannot show is a host that vanished without a reset (a failover behind a moved address, a NAT
that forgot the connection). `SELECT 1` waits out the write timeout there (db_config.KEEPALIVES) and Django
reconnects; a statement sent on such a connection fails instead, with a 503 to the request or a retry of the
job. Trusting the socket only for a connection that answered within the last two seconds keeps that window to
those two seconds, while a process that serves a steady stream skips the round trip on nearly every request.
"""

import select
import time

from django.db.backends.postgresql import base

try:  # psycopg 3, which Django uses whenever it is installed
    from psycopg import pq
except ImportError:  # psycopg 2: the server is asked, as Django asks it
    pq = None


TRUSTED_FOR_SECONDS = 2.0  # a quiet socket stands for a health check this long after the connection was last used


class DatabaseWrapper(base.DatabaseWrapper):
    used_at = float("-inf")  # when a cursor was last handed out on this wrapper's connection (time.monotonic)

    def is_usable(self) -> bool:
        if self.connection is None:
            return False
        recent = time.monotonic() - self.used_at < TRUSTED_FOR_SECONDS
        return (recent and quiet(self.connection)) or super().is_usable()

    def _prepare_cursor(self, cursor):
        self.used_at = time.monotonic()  # Django's cursors and Herald's bound ones all come through here
        return super()._prepare_cursor(cursor)


def quiet(connection) -> bool:
    """Whether a psycopg 3 connection is open and idle, with nothing the server sent waiting to be read. False
    also where that cannot be told (psycopg 2; a socket psycopg cannot give): the caller then asks the server."""
    if pq is None:
        return False
    try:
        if connection.closed or connection.broken:
            return False
        pgconn = connection.pgconn
        if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return False
        poller = select.poll()  # not select(): a worker's descriptors go past its 1,024
        poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except Exception:  # whatever psycopg or the socket says, the server is asked instead
        return False

"""Django's PostgreSQL backend, whose connection health check asks the socket before it asks the server.

With `CONN_HEALTH_CHECKS` (Herald's processes keep their connections: `delivery.db_config.database()`), Django runs
`SELECT 1` before the first statement of each request: a round trip, and the web process's and PostgreSQL's CPU
for it, on every publish. A connection the server has ended (a restart, `pg_terminate_backend`, an idle timeout, a
crash the kernel saw) has the server's goodbye, or the end of the stream, waiting on its socket. So: a connection
open and idle whose socket has nothing to read is taken as usable without a statement; anything else (something to
read, a transaction not idle, a socket psycopg cannot give) is asked `SELECT 1` as before. A host that vanished
without a reset is found as before too: by the first statement, within the keepalives' and the write timeout's
bound (db_config.KEEPALIVES).
"""

import select

from django.db.backends.postgresql import base

try:  # psycopg 3, which Django uses whenever it is installed
    from psycopg import pq
except ImportError:  # psycopg 2: the server is asked, as Django asks it
    pq = None


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        if self.connection is None:
            return False
        return quiet(self.connection) or super().is_usable()


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

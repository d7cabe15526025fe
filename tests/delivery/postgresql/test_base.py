"""delivery/postgresql/base.py: the health check asks the socket, and the server only when the socket says
something or the connection has not been used lately. A connection in use answers without a statement; one the
server ended is found unusable and closed, so the request's first statement runs on a new connection."""

import time

import pytest
from django.db import connection, connections

from delivery.postgresql import base

pytestmark = pytest.mark.django_db(transaction=True)


def other_connection():
    params = connection.get_connection_params()
    return connection.Database.connect(**{k: v for k, v in params.items() if k != "cursor_factory"}, autocommit=True)


def last_statement(pid: int) -> str:
    with other_connection() as other:
        return other.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]


def socket_has_something(timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while base.quiet(connection.connection):
        assert time.monotonic() < deadline, "the server's goodbye never reached the socket"
        time.sleep(0.01)


def test_the_backend_is_the_one_db_config_names():
    assert connection.settings_dict["ENGINE"] == "delivery.postgresql"
    assert isinstance(connections["default"], base.DatabaseWrapper) and connection.vendor == "postgresql"


def test_a_connection_in_use_is_usable_without_a_statement():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'before the check'")
        pid = connection.connection.info.backend_pid
    assert connection.is_usable()
    assert last_statement(pid) == "SELECT 'before the check'"  # no SELECT 1 went to the server


def test_a_connection_unused_for_a_while_is_asked_of_the_server():
    """A host that vanished without a reset leaves a quiet socket: only a recent answer stands for a check."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'long ago'")
        pid = connection.connection.info.backend_pid
    connections["default"].used_at -= base.TRUSTED_FOR_SECONDS + 1  # as if that statement were older
    assert connection.is_usable()
    assert last_statement(pid) == "SELECT 1"


def test_a_connection_the_server_ended_is_unusable_and_the_next_request_reconnects():
    connection.ensure_connection()
    ended = connection.connection.info.backend_pid
    with other_connection() as other:
        other.execute("SELECT pg_terminate_backend(%s)", [ended])
    socket_has_something()
    assert not connection.is_usable()  # the socket spoke: the server was asked, and it is gone
    connection.close_if_unusable_or_obsolete()  # what a request's start and end do
    connection.close_if_health_check_failed()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != ended


def test_a_transaction_left_open_is_asked_of_the_server():
    connection.ensure_connection()
    raw = connection.connection
    raw.execute("BEGIN")
    try:
        assert not base.quiet(raw)
        assert connection.is_usable()  # SELECT 1 answered
    finally:
        raw.execute("ROLLBACK")


def test_what_cannot_be_told_is_asked_of_the_server():
    class Gone:
        closed = False
        broken = False

        @property
        def pgconn(self):
            raise OSError("no socket")

    assert base.quiet(Gone()) is False
    assert base.quiet(None) is False

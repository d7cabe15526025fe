"""A whole-request deadline for the sender (connect, headers and body together).

Socket timeouts bound each read, so an endpoint that drips its answer a byte at a time could hold a sender
thread indefinitely. Here one watchdog thread per process tracks each sending thread's deadline and the
connection it is using; when a deadline passes it shuts that socket down, which ends the blocked read at once.
"""

import socket
import threading
import time
from contextlib import contextmanager

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_lock = threading.Lock()
_wake = threading.Condition(_lock)
_watched: dict[int, dict] = {}  # thread id -> {"deadline", "conn", "fired"}
_watchdog: threading.Thread | None = None


def _watch() -> None:
    with _lock:
        while True:
            now = time.monotonic()
            for entry in _watched.values():
                if not entry["fired"] and entry["deadline"] <= now and entry["conn"] is not None:
                    entry["fired"] = True
                    _cut(entry["conn"])
            upcoming = [e["deadline"] for e in _watched.values() if not e["fired"]]
            _wake.wait(timeout=max(0.01, min(upcoming) - now) if upcoming else None)


def _cut(conn) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:  # the plain socket call, also for TLS sockets: it only ends the blocked read with EOF
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


@contextmanager
def deadline(seconds: float):
    """Within the block, the current thread's request is cut off `seconds` from now. Yields a callable that tells
    whether the deadline fired."""
    global _watchdog
    me = threading.get_ident()
    entry = {"deadline": time.monotonic() + seconds, "conn": None, "fired": False}
    with _lock:
        if _watchdog is None:
            _watchdog = threading.Thread(target=_watch, name="herald-deadlines", daemon=True)
            _watchdog.start()
        _watched[me] = entry
        _wake.notify()
    try:
        yield lambda: entry["fired"]
    finally:
        with _lock:
            _watched.pop(me, None)


def _track(conn) -> None:
    entry = _watched.get(threading.get_ident())
    if entry is not None:
        entry["conn"] = conn


class TrackedConnection:
    """Tells the watchdog which connection the current thread is using (new or reused from the pool)."""

    def connect(self):
        _track(self)
        super().connect()

    def request(self, *args, **kwargs):
        _track(self)
        return super().request(*args, **kwargs)


class DeadlineHTTPConnection(TrackedConnection, HTTPConnection):
    pass


class DeadlineHTTPSConnection(TrackedConnection, HTTPSConnection):
    pass


class DeadlineHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = DeadlineHTTPConnection


class DeadlineHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = DeadlineHTTPSConnection


POOL_CLASSES = {"http": DeadlineHTTPConnectionPool, "https": DeadlineHTTPSConnectionPool}

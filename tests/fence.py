"""The socket fence (docs/security.md, "One way out"): while it is up, every `socket.connect` of this process must be
the transport's (`posting.GUARDED` set: an address the guard checked, under a deadline) or to the test's own
PostgreSQL and Redis; any other connection fails and is recorded. A Python audit hook sees every connect, whatever
library makes it (urllib, requests, jsonschema's retrieval, a socket opened by hand), so a new surface that opens a
connection of its own is caught without being named here."""

import socket
import sys
from urllib.parse import urlsplit

from django.conf import settings

from delivery.transport.posting import GUARDED

_state = {"up": False, "allowed": set(), "crossed": []}


class Fenced(ConnectionRefusedError):
    """A connection the fence refused."""


def _hook(event: str, args) -> None:
    if event != "socket.connect" or not _state["up"]:
        return
    sock, address = args
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or GUARDED.get():
        return
    if (address[0], address[1]) in _state["allowed"]:
        return
    _state["crossed"].append(f"{address[0]}:{address[1]}")
    raise Fenced(f"the socket fence refused a connection to {address[0]}:{address[1]} not made by the transport")


def _own_services() -> set[tuple[str, int]]:
    found = set()
    db = settings.DATABASES["default"]
    if db.get("HOST"):
        found |= {(host, int(db.get("PORT") or 5432)) for host in str(db["HOST"]).split(",")}
    for queue in settings.RQ_QUEUES.values():
        url = queue.get("URL") or f"redis://{queue.get('HOST', '127.0.0.1')}:{queue.get('PORT', 6379)}"
        parts = urlsplit(url)
        found.add((parts.hostname, parts.port or 6379))
    found |= {(f"::ffff:{host}", port) for host, port in found}
    for host, port in list(found):
        try:
            found |= {(info[4][0], port) for info in socket.getaddrinfo(host, port)}
        except OSError:
            pass
    return found


_installed = False


def up() -> None:
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    _state["allowed"], _state["crossed"], _state["up"] = _own_services(), [], True


def allow(host: str, port: int) -> None:
    """A server the test itself runs and talks to (a gunicorn it started, say): the harness, not the product."""
    _state["allowed"].add((host, port))


def down() -> list[str]:
    """Takes the fence down; returns the connections it refused meanwhile."""
    _state["up"] = False
    return list(_state["crossed"])

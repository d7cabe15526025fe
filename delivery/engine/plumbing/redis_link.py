"""Herald's Redis clients: one per process and queue configuration, kept.

`django_rq.get_connection()` and `get_queue()` build a new client with a new connection pool on every call, so each
call paid a TCP connect and handshake; on the publish path that was most of the Redis cost. These keep one client
(thread-safe, pooled) per process, and a fresh one after a fork.
"""

import os
import threading

import django_rq
from django.conf import settings
from redis import Redis
from rq import Queue

from delivery.rules.vocabulary import AttemptQueue

_clients: dict[tuple, Redis] = {}
_lock = threading.Lock()


def connection(queue_name: str = AttemptQueue.DELIVERIES) -> Redis:
    key = (os.getpid(), str(queue_name), repr(settings.RQ_QUEUES.get(str(queue_name))))
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = django_rq.get_connection(queue_name)
    return client


def queue(queue_name: str) -> Queue:
    return django_rq.get_queue(queue_name, connection=connection(queue_name))


def queue_key(queue_name: str) -> str:
    """The Redis list of an RQ queue's jobs, without building the queue (django_rq builds one per call)."""
    return Queue.redis_queue_namespace_prefix + str(queue_name)

"""Redis for `make run`: nothing to do when REDIS_URL (or REDIS_SENTINELS) is set, or when the project's settings name
another Redis for Herald's queues (an embedding project's own `RQ_QUEUES`); else serve one on 127.0.0.1:6379 until
stopped (started again if it exits on its own)."""

import os
import signal
import socket
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from delivery.engine.plumbing import availability, redis_link
from delivery.management import localredis

LOCAL = {("127.0.0.1", 6379), ("localhost", 6379)}


def configured_elsewhere() -> str:
    """The Redis the project's settings name for Herald's queues, if it is not the local one this command serves."""
    kwargs = redis_link.connection().connection_pool.connection_kwargs
    if kwargs.get("path") or (kwargs.get("host", "127.0.0.1"), int(kwargs.get("port", 6379))) not in LOCAL:
        return availability.redis_address(redis_link.connection())
    return ""


class Command(BaseCommand):
    help = "Start a local Redis for development (or idle when REDIS_URL points elsewhere)."

    def handle(self, *args, **options):
        if os.environ.get("REDIS_SENTINELS"):
            self.stdout.write(f"using Redis Sentinel at {os.environ['REDIS_SENTINELS']}; no local Redis started")
            signal.pause()
            return
        if os.environ.get("REDIS_URL"):
            self.stdout.write(f"using REDIS_URL={os.environ['REDIS_URL']}; no local Redis started")
            signal.pause()
            return
        elsewhere = configured_elsewhere()
        if elsewhere:  # the project's settings (RQ_QUEUES, an embedding project's REDIS_URL) name another Redis
            self.stdout.write(f"using the project's Redis at {elsewhere}; no local Redis started")
            signal.pause()
            return
        try:
            with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
                self.stdout.write("a Redis already listens on 127.0.0.1:6379; using it")
                signal.pause()
                return
        except OSError:
            pass
        data_dir = str(settings.BASE_DIR / ".run" / "redis")
        stopping = []
        running: list = []

        def stop(*_):
            stopping.append(True)
            for process in running:
                process.terminate()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while not stopping:
            # A redis-server that exits (killed, stopped by hand) is started again: under honcho, this process
            # ending would stop every other one; Herald's processes wait for Redis meanwhile.
            running[:] = [localredis.start(6379, data_dir, persist=True)]
            self.stdout.write(f"redis-server ({localredis.redis_server_binary()}) on 127.0.0.1:6379, data in "
                              f"{data_dir}")
            code = running[0].wait()
            if not stopping:
                self.stdout.write(f"redis-server exited (code {code}); starting it again in 1 s")
                time.sleep(1)

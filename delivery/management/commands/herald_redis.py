"""Redis for `make run`: nothing to do when REDIS_URL is set; else serve one on 127.0.0.1:6379 until stopped."""

import os
import signal
import socket

from django.conf import settings
from django.core.management.base import BaseCommand

from delivery.management import localredis


class Command(BaseCommand):
    help = "Start a local Redis for development (or idle when REDIS_URL points elsewhere)."

    def handle(self, *args, **options):
        if os.environ.get("REDIS_URL"):
            self.stdout.write(f"using REDIS_URL={os.environ['REDIS_URL']}; no local Redis started")
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
        process = localredis.start(6379, data_dir, persist=True)
        self.stdout.write(f"redis-server ({localredis.redis_server_binary()}) on 127.0.0.1:6379, data in {data_dir}")
        signal.signal(signal.SIGTERM, lambda *_: process.terminate())
        try:
            process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait(10)

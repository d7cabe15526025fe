"""Wait until the database and Redis answer (used before starting processes)."""

import time

import django_rq
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from delivery.rules.vocabulary import AttemptQueue


class Command(BaseCommand):
    help = "Wait until the database and Redis are reachable."

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=60)

    def handle(self, *args, timeout, **options):
        deadline = time.monotonic() + timeout
        last_error = None
        while time.monotonic() < deadline:
            try:
                connection.ensure_connection()
                django_rq.get_connection(AttemptQueue.DELIVERIES).ping()
                return
            except Exception as exc:
                last_error = exc
                connection.close()
                time.sleep(0.5)
        raise CommandError(f"database or Redis not reachable after {timeout}s: {last_error}")

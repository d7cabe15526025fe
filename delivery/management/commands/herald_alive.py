"""`manage.py herald_alive --worker` (or `--scheduler`): a liveness probe from the process's own heartbeat
(delivery/heartbeat.py), for a Kubernetes exec probe or a supervisor. Exit 0 alive, 1 not."""

from django.core.management.base import BaseCommand, CommandError

from delivery import heartbeat


class Command(BaseCommand):
    help = "Exit 0 if this host's Herald workers (or scheduler) beat recently, else 1 saying why."

    def add_arguments(self, parser):
        kind = parser.add_mutually_exclusive_group(required=True)
        kind.add_argument("--worker", action="store_const", const=heartbeat.WORKER, dest="kind")
        kind.add_argument("--scheduler", action="store_const", const=heartbeat.SCHEDULER, dest="kind")
        parser.add_argument("--within", type=float, default=60.0, help="seconds since the last beat (default 60)")

    def handle(self, *args, kind: str, within: float, **options):
        ok, why = heartbeat.alive(kind, within)
        if not ok:
            raise CommandError(why)
        self.stdout.write(why)

"""Where each owner's deliveries stand, for the on-call: due now and the lag (the oldest due delivery's age), in
flight, held, waiting, dead letters of the last day, unhealthy endpoints, confirmations awaited, and the queues
(docs/operators.md). Read from PostgreSQL and Redis at the moment it runs."""

import json

from django.core.management.base import BaseCommand
from django.utils import timezone
from redis.exceptions import RedisError

from delivery.management.commands.herald_why import where
from delivery.web import selectors


class Command(BaseCommand):
    help = "Backlog, lag, held and unhealthy endpoints per owner, and the queues' depths."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json", help="one JSON object instead of text")

    def handle(self, *args, as_json: bool = False, **options):
        owners = selectors.owner_status(timezone.now())
        try:
            queues = selectors.queue_depths()
        except RedisError as exc:
            queues = {"unreachable": str(exc)[:200]}
        for owner in owners:  # a URL's path, query or credentials may carry a token: the host, as the logs give it
            for endpoint in owner["unhealthy"]:
                endpoint["url"] = where(endpoint["url"])
        if as_json:
            self.stdout.write(json.dumps({"owners": owners, "queues": queues}, default=str))
            return
        self.stdout.write("queues: " + ", ".join(f"{name} {depth}" for name, depth in queues.items()))
        if not owners:
            self.stdout.write("nothing due, in flight, held or unhealthy")
        for owner in owners:
            lag = f"{owner['lag_seconds']:.0f} s" if owner["lag_seconds"] is not None else "—"
            self.stdout.write(
                f"\n{owner['name']} (owner {owner['owner']}): due {owner['due']} (lag {lag}), in flight "
                f"{owner['in_flight']}, held {owner['held']}, waiting {owner['waiting']}, dead letters (24 h) "
                f"{owner['dead_letters_24h']}, awaiting confirmation {owner['awaiting_confirmation']}")
            for endpoint in owner["unhealthy"]:
                self.stdout.write(f"  {endpoint['state']}: {endpoint['url']}"
                                  + (f" ({endpoint['reason']})" if endpoint["reason"] else ""))

"""Why a message did or did not reach a subscription, for the on-call: the fan-out's answer for every subscription
of the message's topic (or one), as the message's API and admin pages give it (docs/operators.md)."""

import uuid
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError

from delivery.models import Message
from delivery.web import fanout_report
from delivery.web.fanout_report import audience_words

SHOWN = 50


def where(url: str) -> str:
    """An endpoint as scheme://host[:port]: its path, query or credentials may carry a token (as the logs do)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


class Command(BaseCommand):
    help = "Why a message did or did not reach each subscription of its topic (or one): outcome, reason, fix."

    def add_arguments(self, parser):
        parser.add_argument("message", help="the message's id (a UUID)")
        parser.add_argument("subscription", nargs="?", type=int, help="only this subscription's answer")
        parser.add_argument("--outcome", choices=fanout_report.OUTCOMES, help="only subscriptions with this outcome")
        parser.add_argument("--all", action="store_true", help=f"every row (default: the first {SHOWN})")

    def handle(self, *args, message: str, subscription: int | None, outcome: str | None, all: bool, **options):
        try:
            found = Message.objects.select_related("topic", "tenant").get(id=uuid.UUID(message))
        except (ValueError, Message.DoesNotExist):
            raise CommandError(f"No message {message!r} (give a message's id, as GET /api/messages/ lists them)."
                               ) from None
        self.stdout.write(f"message {found.id} on topic {found.topic.name!r} (owner {found.topic.owner_id}), "
                          f"published {found.published_at:%Y-%m-%d %H:%M:%S} UTC for {audience_words(found)}")
        counts = fanout_report.counts(found)
        self.stdout.write("outcomes: " + (", ".join(f"{name} {n}" for name, n in counts.items()) or "no subscriptions"))
        rows = fanout_report.subscriptions(found, subscription_id=subscription, outcome=outcome)
        total = rows.count()
        if subscription is not None and not total:
            raise CommandError(f"Subscription {subscription} is not one of topic {found.topic.name!r}'s.")
        shown = rows if all else rows[:SHOWN]
        for row in fanout_report.decisions(found, shown):
            whose = f" (tenant {row['tenant']})" if row["tenant"] else ""
            self.stdout.write(f"\nsubscription {row['subscription']}{whose} → {where(row['endpoint'])}\n"
                              f"  {row['outcome']}: {row['reason']}")
            if row["fix"]:
                self.stdout.write(f"  fix: {row['fix']}")
        if not all and total > SHOWN:
            self.stdout.write(f"\n… {total - SHOWN} more (--all, or --outcome to narrow)")

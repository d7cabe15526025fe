"""Print a new signing secret (`whsec_` + base64 of 32 random bytes): configure your receiver with it, then subscribe
with it (`"secret"` in POST /api/subscriptions/), and the confirmation handshake verifies during the create."""

from django.core.management.base import BaseCommand

from delivery.rules.signing import SECRET_BYTES, generate_secret


class Command(BaseCommand):
    help = "Print a new whsec_ signing secret to subscribe with (docs/embedding.md, the receiver walkthrough)."

    def add_arguments(self, parser):
        parser.add_argument("--bytes", type=int, default=32, choices=range(SECRET_BYTES[0], SECRET_BYTES[1] + 1),
                            metavar=f"{SECRET_BYTES[0]}..{SECRET_BYTES[1]}", help="random bytes in it (default 32)")

    def handle(self, *args, bytes: int, **options):
        self.stdout.write(generate_secret(bytes))

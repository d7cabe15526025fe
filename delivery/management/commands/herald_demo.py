"""Create the demo superuser and API token for a local run (`make run`), and print them. A superuser with a known
password has no place in a deployment or a host project, so the command refuses to run unless DEBUG is on."""

import os

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Create (or show) the demo superuser `admin` and its API token (local runs only: needs DEBUG)."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("herald_demo creates a superuser with a known password, for local runs only: it "
                               "runs with DEBUG on (make run sets DEBUG=1). Create real accounts with "
                               "createsuperuser.")
        User = get_user_model()
        password = os.environ.get("HERALD_DEMO_PASSWORD", "herald-demo")
        user, created = User.objects.get_or_create(username="admin", defaults={"is_staff": True,
                                                                                "is_superuser": True})
        if created:
            user.set_password(password)
            user.save()
        token, _ = Token.objects.get_or_create(user=user)
        shown = password if created or os.environ.get("HERALD_DEMO_PASSWORD") else "(unchanged since it was created)"
        self.stdout.write(self.style.SUCCESS(f"Herald demo account: user admin, password {shown}; its API token "
                                             "is shown once everything is up."))

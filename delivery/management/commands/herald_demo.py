"""Create the demo superuser and API token for a local run, and print them."""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Create (or show) the demo superuser `admin` and its API token."

    def handle(self, *args, **options):
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

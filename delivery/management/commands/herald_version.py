"""`manage.py herald_version`: the version of Herald this project runs (CHANGELOG.md names what it brought)."""

from django.core.management.base import BaseCommand

from delivery import VERSION


class Command(BaseCommand):
    help = "Print Herald's version."

    def handle(self, *args, **options):
        self.stdout.write(VERSION)

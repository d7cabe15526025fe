"""After adding a new key at the front of HERALD_SECRET_KEYS: re-encrypt every stored signing secret with it, so the
old key can then be removed. Safe to run again; rows are updated in batches."""

from django.core.management.base import BaseCommand
from django.db import connection, transaction

from subscriptions.models import Subscription
from subscriptions.secrets import UnreadableSecret, reencrypt

BATCH = 500


class Command(BaseCommand):
    help = "Re-encrypt every subscription's signing secrets with the first key of HERALD_SECRET_KEYS."

    def handle(self, *args, **options):
        table = Subscription._meta.db_table
        done, last, unreadable = 0, 0, []
        while True:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SELECT id, secret, previous_secret FROM {table} WHERE id > %s ORDER BY id LIMIT %s "
                               "FOR UPDATE", [last, BATCH])
                found = cursor.fetchall()
                for row_id, secret, previous in found:
                    try:
                        values = [reencrypt(secret), reencrypt(previous)]
                    except UnreadableSecret:
                        unreadable.append(row_id)
                        continue
                    cursor.execute(f"UPDATE {table} SET secret = %s, previous_secret = %s WHERE id = %s",
                                   [*values, row_id])
            if not found:
                break
            done += len(found)
            last = found[-1][0]
        self.stdout.write(self.style.SUCCESS(f"Re-encrypted the signing secrets of {done - len(unreadable)} "
                                             f"subscription(s) with the first key."))
        if unreadable:
            self.stderr.write(f"No key decrypts the secrets of subscription(s) {unreadable[:50]}; they were left as "
                              "they are: rotate their secrets (docs/security.md).")

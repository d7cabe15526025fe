"""After adding a new key at the front of HERALD_SECRET_KEYS: re-encrypt every stored secret with it (signing
secrets, mTLS client keys, OAuth2 client secrets, secret delivery headers), so the old key can then be removed.
Safe to run again; rows are updated in batches."""

import json

from django.core.management.base import BaseCommand
from django.db import connection, transaction

from subscriptions.models import Subscription
from subscriptions.secrets import UnreadableSecret, reencrypt

BATCH = 500
# Every encrypted column; delivery_headers holds encrypted values inside its JSON.
COLUMNS = ("secret", "previous_secret", "client_key", "oauth_client_secret")


class Command(BaseCommand):
    help = "Re-encrypt every subscription's signing secrets with the first key of HERALD_SECRET_KEYS."

    def handle(self, *args, **options):
        table = Subscription._meta.db_table
        done, last, unreadable = 0, 0, []
        while True:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SELECT id, {', '.join(COLUMNS)}, delivery_headers FROM {table} WHERE id > %s "
                               f"ORDER BY id LIMIT %s FOR UPDATE", [last, BATCH])
                found = cursor.fetchall()
                for row_id, *stored, headers in found:
                    try:
                        values = [reencrypt(value) for value in stored]
                        headers = headers if isinstance(headers, list) else json.loads(headers or "[]")
                        headers = [{**h, "value": reencrypt(h["value"])} if h.get("secret") else h for h in headers]
                    except UnreadableSecret:
                        unreadable.append(row_id)
                        continue
                    assignments = ", ".join(f"{column} = %s" for column in COLUMNS)
                    cursor.execute(f"UPDATE {table} SET {assignments}, delivery_headers = %s WHERE id = %s",
                                   [*values, json.dumps(headers), row_id])
            if not found:
                break
            done += len(found)
            last = found[-1][0]
        self.stdout.write(self.style.SUCCESS(f"Re-encrypted the signing secrets of {done - len(unreadable)} "
                                             f"subscription(s) with the first key."))
        if unreadable:
            self.stderr.write(f"No key decrypts the secrets of subscription(s) {unreadable[:50]}; they were left as "
                              "they are: rotate their secrets (docs/security.md).")

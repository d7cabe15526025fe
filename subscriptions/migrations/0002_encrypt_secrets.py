# Signing secrets encrypted at rest: the columns become text (a Fernet token is longer than a secret), then every
# stored secret is encrypted with the first of HERALD_SECRET_KEYS (subscriptions/secrets.py). Reversible: going back
# decrypts them (which needs the key).

import subscriptions.models
import subscriptions.secrets
from django.db import migrations

from subscriptions.secrets import PREFIX, decrypt, encrypt



def rows(schema_editor, model):
    table = schema_editor.quote_name(model._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, secret, previous_secret FROM {table}")
        return table, cursor.fetchall()


def encrypt_all(apps, schema_editor):
    table, found = rows(schema_editor, apps.get_model("herald_subscriptions", "Subscription"))
    with schema_editor.connection.cursor() as cursor:
        for row_id, secret, previous in found:
            values = [value if not value or value.startswith(PREFIX) else encrypt(value) for value in (secret, previous)]
            cursor.execute(f"UPDATE {table} SET secret = %s, previous_secret = %s WHERE id = %s", [*values, row_id])


def decrypt_all(apps, schema_editor):
    table, found = rows(schema_editor, apps.get_model("herald_subscriptions", "Subscription"))
    with schema_editor.connection.cursor() as cursor:
        for row_id, secret, previous in found:
            values = [decrypt(value) if value else value for value in (secret, previous)]
            cursor.execute(f"UPDATE {table} SET secret = %s, previous_secret = %s WHERE id = %s", [*values, row_id])


class Migration(migrations.Migration):

    dependencies = [
        ('herald_subscriptions', '0001_initial'),
    ]

    operations = [
        migrations.AlterField(
            model_name='subscription',
            name='previous_secret',
            field=subscriptions.secrets.EncryptedSecretField(blank=True, default=''),
        ),
        migrations.AlterField(
            model_name='subscription',
            name='secret',
            field=subscriptions.secrets.EncryptedSecretField(default=subscriptions.models.generate_secret),
        ),
        migrations.RunPython(encrypt_all, decrypt_all),
    ]

"""Subscription.keys_id: the unguessable public name of a subscription's Ed25519 public keys (a distinct value for
every existing row, then unique)."""

import uuid

from django.db import migrations, models


def name_existing(apps, schema_editor):
    Subscription = apps.get_model("herald_subscriptions", "Subscription")
    for subscription in Subscription.objects.filter(keys_id__isnull=True).only("id"):
        Subscription.objects.filter(id=subscription.id).update(keys_id=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [("herald_subscriptions", "0006_stream_options")]

    operations = [
        migrations.AddField(model_name="subscription", name="keys_id", field=models.UUIDField(null=True, editable=False)),
        migrations.RunPython(name_existing, migrations.RunPython.noop),
        migrations.AlterField(model_name="subscription", name="keys_id",
                              field=models.UUIDField(default=uuid.uuid4, unique=True, editable=False)),
    ]

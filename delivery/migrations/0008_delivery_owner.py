"""Each delivery carries its topic's owner, so that claiming can share due work fairly across owners."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

BACKFILL = """
UPDATE herald_delivery_delivery SET owner_id = (
    SELECT topic.owner_id FROM herald_delivery_message AS message
    JOIN herald_subscriptions_topic AS topic ON topic.id = message.topic_id
    WHERE message.id = herald_delivery_delivery.message_id)
WHERE owner_id IS NULL
"""


class Migration(migrations.Migration):

    dependencies = [
        ("herald_delivery", "0007_dashboard_entry"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="delivery", name="owner",
            field=models.ForeignKey(null=True, db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="+", to=settings.AUTH_USER_MODEL),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="delivery", name="owner",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                    to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(condition=models.Q(("status", "pending")), fields=["owner", "next_attempt_at"],
                               name="delivery_pending_owner_due"),
        ),
    ]

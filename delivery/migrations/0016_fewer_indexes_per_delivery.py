import django.db.models.deletion
from django.db import migrations, models

from delivery.migrations._online import AddIndexOnline, DropForeignKeyIndexOnline


class Migration(migrations.Migration):
    """Two indexes fewer to keep up on each row version of a delivery: the subscription's own (delivery_subscription_due
    leads with it) and the replay's, which becomes partial (only replays' deliveries have one). Built and dropped
    CONCURRENTLY, the new one first."""

    atomic = False

    dependencies = [
        ('herald_delivery', '0015_subscription_due_index'),
        ('herald_subscriptions', '0009_tenants'),
    ]

    operations = [
        AddIndexOnline(
            model_name='delivery',
            index=models.Index(condition=models.Q(('replay__isnull', False)), fields=['replay'],
                               name='delivery_replayed'),
        ),
        DropForeignKeyIndexOnline(
            model_name='delivery',
            name='replay',
            field=models.ForeignKey(blank=True, db_index=False,
                                    help_text="The replay that created it; empty for the message's own delivery.",
                                    null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name='deliveries', to='herald_delivery.replay'),
        ),
        DropForeignKeyIndexOnline(
            model_name='delivery',
            name='subscription',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name='deliveries', to='herald_subscriptions.subscription'),
        ),
    ]

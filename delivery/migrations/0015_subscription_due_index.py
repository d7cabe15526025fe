from django.db import migrations, models

from delivery.migrations._online import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):
    """(subscription, status) becomes (subscription, status, next_attempt_at): a batching subscription's claim reads
    a batch of its oldest due rows along it instead of sorting its whole backlog. Built before the old one goes, both
    without holding writes to the table."""

    atomic = False

    dependencies = [
        ('herald_delivery', '0014_trace_context'),
    ]

    operations = [
        AddIndexOnline(
            model_name='delivery',
            index=models.Index(fields=['subscription', 'status', 'next_attempt_at'], name='delivery_subscription_due'),
        ),
        RemoveIndexOnline(
            model_name='delivery',
            name='delivery_subscription_status',
        ),
    ]

import django.db.models.functions.comparison
from django.conf import settings
from django.db import migrations, models

import delivery.rules.vocabulary
from delivery.migrations._online import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('herald_delivery', '0011_tenants'),
        ('herald_subscriptions', '0009_tenants'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        AddIndexOnline(
            model_name='delivery',
            index=models.Index(models.F('owner'), django.db.models.functions.comparison.Coalesce(models.F('tenant'), models.Value(0)), models.F('endpoint'), models.F('next_attempt_at'), models.F('id'), condition=models.Q(('status', delivery.rules.vocabulary.DeliveryStatus['PENDING'])), name='delivery_pending_endpoint_due'),
        ),
    ]

import django.db.models.functions.comparison
from django.conf import settings
from django.db import migrations, models

import delivery.rules.vocabulary


class AddIndexOnline(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, so publishing and claiming go on while it builds (a plain CREATE
    INDEX holds writes to the table for the whole build); a plain AddIndex elsewhere (SQLite). Written on AddIndex,
    not django.contrib.postgres's AddIndexConcurrently: importing that needs psycopg, which a project on SQLite
    (installed without the postgres extra) does not have."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.add_index(model, self.index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.remove_index(model, self.index, concurrently=True)


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

"""Index changes that leave the table open: CREATE / DROP INDEX CONCURRENTLY on PostgreSQL, so publishing and
claiming go on while an index builds (a plain CREATE INDEX holds writes to the table for the whole build); the plain
operation elsewhere (SQLite). Written on AddIndex / RemoveIndex, not django.contrib.postgres's concurrent ones:
importing those needs psycopg, which a project on SQLite (installed without the postgres extra) does not have. A
migration using them sets `atomic = False` (CONCURRENTLY cannot run in a transaction). The leading underscore keeps
the migration loader from taking this module for a migration."""

from django.db import migrations
from django.db.models import Index


def _change(operation, schema_editor, app_label: str, state, index, *, add: bool) -> None:
    """Build (add) or drop `index` CONCURRENTLY on the model as `state` has it."""
    model = state.apps.get_model(app_label, operation.model_name)
    if operation.allow_migrate_model(schema_editor.connection.alias, model):
        change = schema_editor.add_index if add else schema_editor.remove_index
        change(model, index, concurrently=True)


class AddIndexOnline(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL; a plain AddIndex elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        _change(self, schema_editor, app_label, to_state, self.index, add=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        _change(self, schema_editor, app_label, from_state, self.index, add=False)


class RemoveIndexOnline(migrations.RemoveIndex):
    """DROP INDEX CONCURRENTLY on PostgreSQL; a plain RemoveIndex elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        _change(self, schema_editor, app_label, from_state, index, add=False)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        _change(self, schema_editor, app_label, to_state, index, add=True)


class DropForeignKeyIndexOnline(migrations.AlterField):
    """An AlterField that only turns a foreign key's own index off (`db_index=False`, another index leading with the
    column serves its lookups): DROP INDEX CONCURRENTLY on PostgreSQL, the index found by its column whatever its
    generated name; the plain AlterField elsewhere and backwards."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        named = {index.name for index in model._meta.indexes}
        column = model._meta.get_field(self.name).column
        for name in schema_editor._constraint_names(model, [column], index=True, type_=Index.suffix, exclude=named):
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        # (AlterField's own backwards calls database_forwards above, which would drop the index again.)
        migrations.AlterField.database_forwards(self, app_label, schema_editor, from_state, to_state)

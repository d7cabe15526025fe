"""Index changes that leave the table open: CREATE / DROP INDEX CONCURRENTLY on PostgreSQL, so publishing and
claiming go on while an index builds (a plain CREATE INDEX holds writes to the table for the whole build); the plain
operation elsewhere (SQLite). Written on AddIndex / RemoveIndex, not django.contrib.postgres's concurrent ones:
importing those needs psycopg, which a project on SQLite (installed without the postgres extra) does not have. A
migration using them sets `atomic = False` (CONCURRENTLY cannot run in a transaction). The leading underscore keeps
the migration loader from taking this module for a migration."""

from django.db import migrations


class AddIndexOnline(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL; a plain AddIndex elsewhere."""

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


class RemoveIndexOnline(migrations.RemoveIndex):
    """DROP INDEX CONCURRENTLY on PostgreSQL; a plain RemoveIndex elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            schema_editor.remove_index(model, index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            schema_editor.add_index(model, index, concurrently=True)

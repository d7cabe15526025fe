"""Index changes that leave the table open: CREATE / DROP INDEX CONCURRENTLY on PostgreSQL, so publishing and
claiming go on while an index builds (a plain CREATE INDEX holds writes to the table for the whole build); the plain
operation elsewhere (SQLite). Written on AddIndex / RemoveIndex, not django.contrib.postgres's concurrent ones:
importing those needs psycopg, which a project on SQLite (installed without the postgres extra) does not have. A
migration using them sets `atomic = False` (CONCURRENTLY cannot run in a transaction). The leading underscore keeps
the migration loader from taking this module for a migration."""

from django.db import NotSupportedError, migrations
from django.db.models import Index


def _change(operation, schema_editor, app_label: str, state, index, *, add: bool) -> None:
    """Build (add) or drop `index` CONCURRENTLY on the model as `state` has it. A build interrupted earlier (a
    timeout, a cancelled deploy) left an index of that name: an invalid one is dropped and built again, a valid one
    kept, so that running `migrate` again finishes the job."""
    _outside_a_transaction(schema_editor)
    model = state.apps.get_model(app_label, operation.model_name)
    if not operation.allow_migrate_model(schema_editor.connection.alias, model):
        return
    if add:
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                           "WHERE c.relname = %s AND i.indrelid = %s::regclass",
                           [index.name, model._meta.db_table])
            found = cursor.fetchone()
        if found and found[0]:
            return
        if found:
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(index.name)}")
        schema_editor.add_index(model, index, concurrently=True)
    else:
        schema_editor.remove_index(model, index, concurrently=True)


def _outside_a_transaction(schema_editor) -> None:
    if schema_editor.connection.in_atomic_block:
        raise NotSupportedError("CONCURRENTLY cannot run in a transaction: the migration needs `atomic = False`")


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
    column serves its lookups). On PostgreSQL: DROP INDEX CONCURRENTLY, the index found by its column whatever its
    generated name, and backwards CREATE INDEX CONCURRENTLY under Django's name (a plain AlterField would drop the
    foreign key's constraint and add it back, checking every row while holding writes). The plain AlterField
    elsewhere (SQLite)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        _outside_a_transaction(schema_editor)
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        for name in self._own_indexes(schema_editor, model):
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            # (AlterField's own backwards calls database_forwards above.)
            return migrations.AlterField.database_forwards(self, app_label, schema_editor, from_state, to_state)
        _outside_a_transaction(schema_editor)
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        for name in self._own_indexes(schema_editor, model):  # an interrupted build's, valid or not
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")
        schema_editor.execute(schema_editor._create_index_sql(model, fields=[model._meta.get_field(self.name)],
                                                              concurrently=True))

    def _own_indexes(self, schema_editor, model) -> list[str]:
        """The names of the plain indexes on exactly this field's column, other than the model's named ones (how
        Django's own AlterField finds a foreign key's index: `_constraint_names`)."""
        named = {index.name for index in model._meta.indexes}
        column = model._meta.get_field(self.name).column
        return schema_editor._constraint_names(model, [column], index=True, type_=Index.suffix, exclude=named)

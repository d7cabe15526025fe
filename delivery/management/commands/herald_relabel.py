"""Once, when upgrading a database created before Herald's apps had labels of their own (`subscriptions` and
`delivery`, now `herald_subscriptions` and `herald_delivery`): rename the tables, the migration records and the
content types, so `migrate` finds everything in place. Run it before `migrate`; it does nothing on a database that
does not need it (a new one, or one already relabelled), and nothing to a project's own apps of those names (it
acts only when every one of Herald's tables exists under its old name)."""

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import connection, transaction
from django.db.migrations.loader import MigrationLoader

RENAMED = {"subscriptions": "herald_subscriptions", "delivery": "herald_delivery"}


class Command(BaseCommand):
    help = ("Move a database from Herald's old app labels (subscriptions, delivery) to herald_subscriptions and "
            "herald_delivery.")

    def handle(self, *args, **options):
        tables = set(connection.introspection.table_names())
        if "django_migrations" not in tables:
            self.stdout.write("A new database: nothing to relabel.")
            return
        with transaction.atomic():
            for old, new in RENAMED.items():
                self.relabel(old, new, tables)

    def relabel(self, old: str, new: str, tables: set[str]) -> None:
        models = list(apps.get_app_config(new).get_models())
        moves = [(model, f"{old}_{model._meta.model_name}") for model in models if not model._meta.proxy]
        if not all(old_table in tables for _, old_table in moves):
            self.stdout.write(f"{new}: nothing to relabel.")
            return
        with connection.schema_editor() as editor:
            for model, old_table in moves:
                if model._meta.db_table not in tables:
                    editor.alter_db_table(model, old_table, model._meta.db_table)
        with connection.cursor() as cursor:
            names = [name for name in self.migration_names(new)]
            cursor.execute("UPDATE django_migrations SET app = %s WHERE app = %s AND name IN ({})".format(
                ", ".join(["%s"] * len(names))), [new, old, *names])
            if "django_content_type" in connection.introspection.table_names():
                model_names = [model._meta.model_name for model in models]  # proxies have content types too
                cursor.execute("UPDATE django_content_type SET app_label = %s WHERE app_label = %s AND model IN ({})"
                               .format(", ".join(["%s"] * len(model_names))), [new, old, *model_names])
        self.stdout.write(self.style.SUCCESS(f"{old} → {new}: {len(moves)} tables, migration records and content "
                                             f"types renamed."))

    @staticmethod
    def migration_names(label: str) -> list[str]:
        loader = MigrationLoader(None, ignore_no_migrations=True)
        return [name for app, name in loader.disk_migrations if app == label]

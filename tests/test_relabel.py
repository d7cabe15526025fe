"""Upgrading a database from before Herald's apps had labels of their own (`subscriptions`, `delivery`): one
`herald_relabel` before `migrate` renames tables, migration records and content types, and keeps the data."""

import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection

from tests.conftest import ROOT, subprocess_env


@pytest.fixture
def scratch_database():
    settings = connection.settings_dict
    admin_url = f"postgresql://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS herald_relabel")
        admin.execute("CREATE DATABASE herald_relabel")
    url = urlunsplit(urlsplit(admin_url)._replace(path="/herald_relabel"))
    yield url
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS herald_relabel WITH (FORCE)")


def manage(url, *args):
    env = subprocess_env()
    env["DATABASE_URL"] = url
    run = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_a_database_with_the_old_labels_is_moved_to_the_new_ones(scratch_database):
    url = scratch_database
    manage(url, "migrate", "--noinput")
    with psycopg.connect(url, autocommit=True) as db:  # make it look as it did before the labels changed
        db.execute("INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
                   "is_active, date_joined) VALUES ('', false, 'old', '', '', '', false, true, now())")
        db.execute("INSERT INTO herald_subscriptions_topic (owner_id, name, description, created_at, updated_at) "
                   "SELECT id, 'kept', '', now(), now() FROM auth_user WHERE username = 'old'")
        tables = [row[0] for row in db.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'herald\\_%'").fetchall()]
        for table in tables:
            db.execute(f'ALTER TABLE "{table}" RENAME TO "{table.removeprefix("herald_")}"')
        for old in ("subscriptions", "delivery"):
            db.execute("UPDATE django_migrations SET app = %s WHERE app = %s", [old, f"herald_{old}"])
            db.execute("UPDATE django_content_type SET app_label = %s WHERE app_label = %s", [old, f"herald_{old}"])

    out = manage(url, "herald_relabel")
    assert "subscriptions → herald_subscriptions: 9 tables" in out and "delivery → herald_delivery: 5 tables" in out
    assert "No migrations to apply." in manage(url, "migrate", "--noinput")
    assert "nothing to relabel" in manage(url, "herald_relabel")  # a second run changes nothing
    with psycopg.connect(url) as db:
        assert db.execute("SELECT name FROM herald_subscriptions_topic").fetchall() == [("kept",)]
        assert db.execute("SELECT count(*) FROM django_content_type WHERE app_label IN ('subscriptions', 'delivery')"
                          ).fetchone()[0] == 0

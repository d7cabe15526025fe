"""Upgrading a database, on a scratch database of its own:

- from before Herald's apps had labels of their own (`subscriptions`, `delivery`): one `herald_relabel` before
  `migrate` renames tables, migration records and content types, and keeps the data;
- the index migrations built and dropped CONCURRENTLY (delivery/migrations/_online.py): backwards and forwards
  again, and `migrate` run again after an interruption (docs/deployment.md, "Upgrades")."""

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
    assert "subscriptions → herald_subscriptions: 10 tables" in out and "delivery → herald_delivery: 5 tables" in out
    assert "No migrations to apply." in manage(url, "migrate", "--noinput")
    assert "nothing to relabel" in manage(url, "herald_relabel")  # a second run changes nothing
    with psycopg.connect(url) as db:
        assert db.execute("SELECT name FROM herald_subscriptions_topic").fetchall() == [("kept",)]
        assert db.execute("SELECT count(*) FROM django_content_type WHERE app_label IN ('subscriptions', 'delivery')"
                          ).fetchone()[0] == 0


INDEXES = "SELECT indexname FROM pg_indexes WHERE tablename = 'herald_delivery_delivery'"
FOREIGN_KEYS = """SELECT array_agg(oid ORDER BY oid) FROM pg_constraint
                  WHERE conrelid = 'herald_delivery_delivery'::regclass AND contype = 'f'"""  # dropped and added: new


def test_the_online_index_migrations_go_back_and_forth_and_finish_after_an_interruption(scratch_database):
    url = scratch_database
    manage(url, "migrate", "--noinput")
    with psycopg.connect(url, autocommit=True) as db:
        after = {row[0] for row in db.execute(INDEXES)}
        foreign_keys = db.execute(FOREIGN_KEYS).fetchone()[0]
    assert {"delivery_subscription_due", "delivery_replayed"} <= after
    assert not any("_subscription_id_" in name or "_replay_id_" in name for name in after), after  # the FKs' own

    manage(url, "migrate", "herald_delivery", "0014", "--noinput")
    with psycopg.connect(url, autocommit=True) as db:
        before = {row[0] for row in db.execute(INDEXES)}
        # The foreign keys' own indexes are back, and their constraints were not dropped and added again (a plain
        # AlterField does, checking every row while holding writes).
        assert db.execute(FOREIGN_KEYS).fetchone()[0] == foreign_keys
    assert "delivery_subscription_status" in before and not {"delivery_subscription_due", "delivery_replayed"} & before
    assert any("_subscription_id_" in name for name in before) and any("_replay_id_" in name for name in before)

    # Interrupted after 0015's build, and after 0016 built its index: left valid in one case, invalid in the other.
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE INDEX delivery_subscription_due ON herald_delivery_delivery "
                   "(subscription_id, status, next_attempt_at)")
        db.execute("CREATE INDEX delivery_replayed ON herald_delivery_delivery (replay_id) "
                   "WHERE replay_id IS NOT NULL")
        db.execute("""UPDATE pg_index SET indisvalid = false
                      WHERE indexrelid = 'delivery_replayed'::regclass""")  # as a failed CONCURRENTLY build leaves it
    manage(url, "migrate", "--noinput")
    with psycopg.connect(url, autocommit=True) as db:
        assert {row[0] for row in db.execute(INDEXES)} == after
        assert db.execute("SELECT bool_and(indisvalid) FROM pg_index "
                          "WHERE indrelid = 'herald_delivery_delivery'::regclass").fetchone()[0]
        assert db.execute(FOREIGN_KEYS).fetchone()[0] == foreign_keys

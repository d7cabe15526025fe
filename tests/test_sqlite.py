"""The engine on SQLite, the database `make run` uses: claim and write-back take their own code paths there (no
SKIP LOCKED, no UPDATE ... FROM VALUES), so the engine's focused tests run again against a SQLite file."""

import os
import subprocess
import sys

from tests.conftest import ROOT

VENDOR = ("import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'tests.settings'); import django; "
          "django.setup(); from django.db import connection; print(connection.vendor)")


def test_the_engine_on_sqlite(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'herald.sqlite3'}"}
    vendor = subprocess.run([sys.executable, "-c", VENDOR], cwd=ROOT, env=env, capture_output=True, text=True)
    assert vendor.stdout.strip() == "sqlite", vendor.stderr
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/delivery/engine/sending/test_attempts.py",
                          "tests/delivery/engine/state/test_transitions.py"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout

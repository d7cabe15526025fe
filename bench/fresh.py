"""A throwaway PostgreSQL cluster with Django set up on it and Herald's tables made: what the benchmarks that call
Herald's code in their own process start from."""

import os
import sys
import tempfile
from pathlib import Path

import django
from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stack import Postgres  # noqa: E402


def django_on_fresh_postgres(prefix: str, **environment: str) -> Postgres:
    """Start a cluster in a new directory named `prefix…`, point Django at it (with `environment` added to the
    process's), set Django up and migrate. The caller stops the cluster (`.stop()`)."""
    workdir = tempfile.mkdtemp(prefix=prefix)
    os.chmod(workdir, 0o755)  # the postgres user runs the cluster in it
    postgres = Postgres(os.path.join(workdir, "pg")).start()
    os.environ.update(DATABASE_URL=postgres.url, DJANGO_SETTINGS_MODULE="project.settings",
                      REDIS_URL="redis://127.0.0.1:1/0", **environment)
    try:
        django.setup()
        call_command("migrate", verbosity=0)
    except BaseException:
        postgres.stop()
        raise
    return postgres

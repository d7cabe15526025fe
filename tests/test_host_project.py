"""A Django project of its own (tests/hostproject: its settings, URLs and app) in a fresh virtualenv where Herald
is installed by pip from this checkout, as docs/embedding.md describes, runs its own tests end to end: publishing in
its transactions, receiving through the receiver helper, Herald's API, admin, dashboard and docs under its URLs, the
outbox fixture. The package's declared dependencies must be enough (versions held to the tested ones)."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def installed(tmp_path, extras: str = "", *also: str):
    """A fresh virtualenv with Herald installed by pip from this checkout's files (with `extras`, and `also`):
    its python."""
    source = tmp_path / "source"  # what a `pip install <git URL>` sees: the repository's files, no build leftovers
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("subscriptions", "delivery"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    pins = []  # the tested versions, as constraints (which take no extras and no includes)
    for requirements in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / requirements).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                name, _, version = line.partition("==")
                pins.append(f"{name.split('[')[0]}=={version}")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-c", str(constraints), f"{source}{extras}", *also], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return python


def host_project(tmp_path, **environment):
    host = tmp_path / "host"
    shutil.copytree(ROOT / "tests" / "hostproject", host, ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in os.environ.items() if key not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    env.update(PYTHONPATH=str(host), DJANGO_SETTINGS_MODULE="settings", **environment)
    return host, env


@pytest.fixture(scope="module")
def with_postgres(tmp_path_factory):
    """A virtualenv with Herald[postgres] installed from this checkout, and pytest (as a host project's CI has);
    with the checkout's own requirements too, for the test that runs the checkout's tests with it."""
    return installed(tmp_path_factory.mktemp("installed"), "[postgres]", "pytest", "pytest-django", "cloudevents",
                     "-r", str(ROOT / "requirements.txt"))


def test_a_host_project_embeds_the_installed_package(tmp_path, with_postgres):
    python = with_postgres
    host, env = host_project(tmp_path)
    run = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(host),
                          "check_host.py"], cwd=host, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "4 passed" in run.stdout


def test_without_the_postgres_extra_a_host_project_migrates_on_sqlite(tmp_path):
    """The documented embedding default: no psycopg installed, SQLite. Every migration runs (the online index
    migration falls back to a plain CREATE INDEX), and the project's checks pass."""
    python = installed(tmp_path)
    assert subprocess.run([str(python), "-c", "import psycopg"], capture_output=True).returncode != 0
    # DATABASES for an embedding project, from the package's declared dependencies alone: docs/embedding.md's
    # "In production" block, as pasted
    production = (ROOT / "docs" / "embedding.md").read_text().split("## In production")[1]
    snippet = production.split("```python\n")[1].split("```")[0]
    pasted = subprocess.run([str(python), "-c", snippet], capture_output=True, text=True,
                            env={**os.environ, "DATABASE_URL": "postgres://shop@db.internal:5432/shop"})
    assert pasted.returncode == 0, pasted.stderr[-2000:]
    host, env = host_project(tmp_path, HOST_SQLITE=str(tmp_path / "host.sqlite3"), REDIS_URL="redis://127.0.0.1:1/0")
    for command in (["migrate", "--noinput"], ["check"]):
        run = subprocess.run([str(python), "-m", "django", *command], cwd=host, env=env, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "herald_delivery.0012" not in run.stderr


def test_herald_s_own_tests_start_in_a_checkout_that_was_pip_installed(with_postgres):
    """The installed package registers its pytest plugin by entry point; the checkout's conftest must not register
    it a second time ("Plugin already registered under a different name")."""
    env = {key: value for key, value in os.environ.items() if key not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    run = subprocess.run([str(with_postgres), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/test_structure.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "test_no_import_cycles" in run.stdout

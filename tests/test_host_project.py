"""A Django project of its own (tests/hostproject: its settings, URLs and app) with Herald installed by pip from this
checkout, as docs/embedding.md describes, runs its own tests end to end: publishing in its transactions, receiving
through the receiver helper, Herald's API, admin, dashboard and docs under its URLs, the outbox fixture."""

import os
import shutil
import subprocess
import sys

from tests.conftest import ROOT


def test_a_host_project_embeds_the_installed_package(tmp_path):
    source = tmp_path / "source"  # what a `pip install <git URL>` sees: the repository's files, no build leftovers
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("subscriptions", "delivery"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                              str(source)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    assert (site / "delivery" / "templates" / "admin" / "herald" / "fanout.html").exists()

    host = tmp_path / "host"
    shutil.copytree(ROOT / "tests" / "hostproject", host, ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{host}", DJANGO_SETTINGS_MODULE="settings")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(host),
                          "check_host.py"], cwd=host, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "3 passed" in run.stdout

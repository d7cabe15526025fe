"""Releases: one version (delivery.VERSION), named by CHANGELOG.md's newest release, shown by `manage.py
herald_version`, the API's root, the admin's footer and every request's User-Agent; pyproject.toml reads it."""

import io
import re
import tomllib
from pathlib import Path

import pytest
from django.core.management import call_command

from delivery import VERSION
from tests.conftest import ROOT

RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.MULTILINE)


def test_the_changelogs_newest_release_is_the_packages_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = RELEASE.findall(text)
    assert releases, "CHANGELOG.md names no release (## [x.y.z] - YYYY-MM-DD)"
    assert releases[0][0] == VERSION
    assert text.index("## [Unreleased]") < text.index(f"## [{VERSION}]")  # what is not released yet, above it
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "delivery.VERSION"}


def test_versions_are_semantic_and_each_release_has_upgrade_notes():
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = [tuple(map(int, version.split("."))) for version, _ in RELEASE.findall(text)]
    assert versions == sorted(versions, reverse=True)
    for version, _ in RELEASE.findall(text):
        section = text.split(f"## [{version}]")[1].split("\n## [")[0]
        assert "### Upgrading" in section, f"{version} has no upgrade notes"


@pytest.mark.django_db
def test_the_version_is_shown_where_an_operator_looks(api, admin_client):
    out = io.StringIO()
    call_command("herald_version", stdout=out)
    assert out.getvalue().strip() == VERSION
    assert api.get("/api/").json()["version"] == VERSION
    assert '<p id="herald-version"' in admin_client.get("/admin/").content.decode()
    assert f"Herald {VERSION}" in admin_client.get("/admin/").content.decode()
    assert Path(ROOT / "delivery" / "__init__.py").read_text().count(VERSION) == 1

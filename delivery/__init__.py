"""Herald's delivery app. Publishing from code: `delivery.events.publish` (docs/embedding.md)."""

# The version, in one place: the package's (pyproject.toml reads it), `manage.py herald_version`, the API's root,
# the admin's footer and every request's User-Agent. CHANGELOG.md's newest release names the same.
VERSION = "0.2.0"

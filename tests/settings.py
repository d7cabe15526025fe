"""Test settings: the project's settings with test-friendly defaults (the environment still wins)."""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key")
os.environ.setdefault("HERALD_REQUIRE_CONFIRMATION", "false")
os.environ.setdefault("HERALD_PUBLIC_URL", "http://127.0.0.1:8000")
os.environ.setdefault("HERALD_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")
os.environ.setdefault("HERALD_RECONCILE_AFTER_SECONDS", "2")
os.environ.setdefault("HERALD_LEASE_MARGIN_SECONDS", "2")
os.environ.setdefault("HERALD_RECONCILE_INTERVAL_SECONDS", "0.5")
os.environ.setdefault("HERALD_SEND_START_WINDOW_SECONDS", "1")
os.environ.setdefault("HERALD_PUMP_LINGER_SECONDS", "0.05")

from project.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast user creation in tests

"""A host project that embeds Herald, as docs/embedding.md describes: its own app (shop), its own settings and
URLs; for Herald only INSTALLED_APPS, one include() and the RQ queues (plus, for this test, 127.0.0.1 allowed as a
webhook address). Run by tests/test_host_project.py against the installed package."""

import os
from urllib.parse import urlsplit, urlunsplit

SECRET_KEY = "host-project-test-key"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "urls"
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Herald and what it builds on
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_rq",
    "subscriptions",
    "delivery",
    # the host's own
    "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                       "django.contrib.auth.context_processors.auth",
                                       "django.contrib.messages.context_processors.messages"]},
}]

# The host's database (this test: a database of its own on the test server; HOST_SQLITE: an SQLite file, as a
# project installed without the postgres extra has).
if os.environ.get("HOST_SQLITE"):
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["HOST_SQLITE"]}}
else:
    database = urlsplit(os.environ["DATABASE_URL"])
    DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "herald_host",
                             "HOST": database.hostname, "PORT": database.port, "USER": database.username,
                             "PASSWORD": database.password or ""}}

# Herald's queues on the host's Redis (this test: a database index of its own).
REDIS_URL = urlunsplit(urlsplit(os.environ["REDIS_URL"])._replace(path="/3"))
RQ_QUEUES = {"deliveries": {"URL": REDIS_URL}, "retries": {"URL": REDIS_URL}}

# Where the shop is reached from outside: the base of confirmation and portal links (its tests override it).
HERALD_PUBLIC_URL = "http://127.0.0.1:8000"

# For this test only: the host's receiver runs on 127.0.0.1, which Herald refuses by default.
HERALD_ALLOWED_NETWORKS = ["127.0.0.0/8"]
# The shop publishes as this user; its topics are created on first use.
HERALD_PUBLISH_OWNER = "shop"
HERALD_CREATE_TOPICS_ON_PUBLISH = True

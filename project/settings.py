"""Herald settings. Everything a deployment changes comes from the environment (see README)."""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from delivery import db_config, redis_config
from delivery.conf import DEFAULTS, from_environment  # Herald's settings and their defaults

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def env_number(name: str, default, cast=int):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}") from None


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
# A deployment (DEBUG off and a DATABASE_URL) must set SECRET_KEY; a local SQLite run gets a development key.
LOCAL_RUN = DEBUG or not os.environ.get("DATABASE_URL")
SECRET_KEY = os.environ.get("SECRET_KEY") or ("insecure-local-development-key" if LOCAL_RUN else None)
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off and DATABASE_URL is set")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from static files: API docs work offline
    "django_rq",
    "subscriptions",
    "delivery",
]

MIDDLEWARE = [
    "delivery.web.probes.ProbeMiddleware",  # /healthz and /readyz, whatever the Host header (docs/deployment.md)
    "delivery.web.server_spans.ServerSpanMiddleware",  # a SERVER span per request, tracing on (docs/operators.md)
    "delivery.web.api.oversized.OversizedBodyMiddleware",  # a JSON 413 the client can read (docs/security.md)
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# PostgreSQL (one host, or a list to fail over between) or SQLite, and how Herald connects to it
# (DATABASE_POOLER=pgbouncer behind PgBouncer in transaction pooling mode): delivery/db_config.py.
DATABASE_POOLER = os.environ.get("DATABASE_POOLER", "").strip().lower()
DATABASES = {"default": db_config.database(os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'herald.sqlite3'}",
                                           pooler=DATABASE_POOLER)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["project.formats"]  # dates and times to the second (project/formats/en/formats.py)
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# --- REST API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: an anonymous request then gets 401 with a WWW-Authenticate header, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "delivery.web.api.authentication.HeraldTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "delivery.web.api.pagination.BoundedLimitOffsetPagination",
    "DEFAULT_PARSER_CLASSES": [
        "delivery.web.api.parsers.SafeJSONParser",
        # For the browsable API's HTML forms. URL-encoded forms are refused with a 415 that says to send JSON
        # (`curl -d '{...}'` without a Content-Type header sends one, which would read as "field required").
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "delivery.web.api.errors.api_exception_handler",
}
# --- Redis and RQ -----------------------------------------------------------------------------
# One Redis (REDIS_URL), or the primary Redis Sentinel names (REDIS_SENTINELS, REDIS_SENTINEL_MASTER, REDIS_DB,
# REDIS_PASSWORD, REDIS_SENTINEL_PASSWORD): delivery/redis_config.py.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
RQ_QUEUES = redis_config.rq_queues(os.environ, REDIS_URL)
# Non-forking workers keep the database connection, HTTP keep-alive pools and parsed policies across jobs
# (docs/architecture.md); `manage.py rqworker deliveries retries` uses it without further flags.
RQ = {"COMMIT_MODE": "on_db_commit", "WORKER_CLASS": "delivery.engine.sending.worker.HeraldWorker"}
# The cache backs the API's rate limits, so it is shared by every web process: Redis.
CACHES = {"default": redis_config.cache(os.environ, REDIS_URL)}

# --- Herald -----------------------------------------------------------------------------------
# Every HERALD_* setting has its default in delivery/conf.py; the environment sets any of them (HERALD_<NAME>, typed
# by the default: true/false, numbers, comma-separated lists).
globals().update(from_environment(os.environ))
_herald = {name: globals().get(f"HERALD_{name}", default) for name, default in DEFAULTS.items()}
# A request body may carry the payload JSON-escaped (up to 6 bytes a character) plus its envelope; larger bodies
# are answered 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, 6 * _herald["MAX_PAYLOAD_BYTES"] + 65_536)

# HERALD_LOG_FORMAT=json: one JSON object per line (attempt lines carry their fields at the top level).
# RQ's own per-job lines ("Job OK") are off unless RQ_LOG_LEVEL=INFO: each attempt has its own line instead.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "delivery.logformat.JSONFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             "formatter": "json" if _herald["LOG_FORMAT"] == "json" else "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"rq.worker": {"level": _herald["RQ_LOG_LEVEL"]}},
}

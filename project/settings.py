"""Herald settings. Everything a deployment changes comes from the environment (see README)."""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VERSION = "0.1.0"


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

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'herald.sqlite3'}",
        conn_max_age=600,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite is the zero-setup local default: wait for the writer lock instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
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
        "delivery.web.authentication.HeraldTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "delivery.web.pagination.BoundedLimitOffsetPagination",
    "DEFAULT_PARSER_CLASSES": [
        "delivery.web.parsers.SafeJSONParser",
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
    "EXCEPTION_HANDLER": "delivery.web.errors.api_exception_handler",
    "DEFAULT_THROTTLE_RATES": {"publish": os.environ.get("HERALD_PUBLISH_RATE", "6000/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Herald API",
    "DESCRIPTION": "Publish events to topics; Herald delivers them to every subscriber's webhook.",
    "VERSION": VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "DeliveryStatusEnum": "delivery.models.Delivery.Status",
        "SubscriptionStatusEnum": "subscriptions.models.Subscription.Status",
    },
}

# --- Redis and RQ -----------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
RQ_QUEUES = {
    "deliveries": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 300},
    "retries": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 300},
}
# Non-forking workers keep the database connection, HTTP keep-alive pools and parsed policies across jobs
# (docs/architecture.md); `manage.py rqworker deliveries retries` uses it without further flags.
RQ = {"COMMIT_MODE": "on_db_commit", "WORKER_CLASS": "delivery.engine.worker.HeraldWorker"}
# The cache backs the API's rate limits, so it is shared by every web process: Redis.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                      "KEY_PREFIX": "herald", "TIMEOUT": 300}}

# --- Herald -----------------------------------------------------------------------------------
HERALD_DEFAULT_DELIVERY_POLICY = os.environ.get("HERALD_DEFAULT_DELIVERY_POLICY", "workfront")
HERALD_REQUIRE_CONFIRMATION = env_bool("HERALD_REQUIRE_CONFIRMATION", True)
HERALD_MAX_PAYLOAD_BYTES = env_number("HERALD_MAX_PAYLOAD_BYTES", 262_144)
HERALD_ALLOWED_NETWORKS = env_list("HERALD_ALLOWED_NETWORKS")
# A request body may carry the payload JSON-escaped (up to 6 bytes a character) plus its envelope; larger bodies
# are answered 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, 6 * HERALD_MAX_PAYLOAD_BYTES + 65_536)
HERALD_DISABLE_FAILURE_RATE = env_number("HERALD_DISABLE_FAILURE_RATE", 0.70, float)
HERALD_DISABLE_MIN_ATTEMPTS = env_number("HERALD_DISABLE_MIN_ATTEMPTS", 100)
HERALD_DISABLE_CONSECUTIVE_FAILURES = env_number("HERALD_DISABLE_CONSECUTIVE_FAILURES", 2000)
HERALD_FREEZE_CONSECUTIVE_FAILURES = env_number("HERALD_FREEZE_CONSECUTIVE_FAILURES", 2000)
HERALD_FREEZE_SILENCE_SECONDS = env_number("HERALD_FREEZE_SILENCE_SECONDS", 259_200)
HERALD_FREEZE_ABSOLUTE_FAILURES = env_number("HERALD_FREEZE_ABSOLUTE_FAILURES", 50_000)
HERALD_PROBE_INTERVAL_SECONDS = env_number("HERALD_PROBE_INTERVAL_SECONDS", 600)
HERALD_RATE_WINDOW_SECONDS = env_number("HERALD_RATE_WINDOW_SECONDS", 86_400)
HERALD_DISPATCH_INTERVAL_SECONDS = env_number("HERALD_DISPATCH_INTERVAL_SECONDS", 1.0, float)
HERALD_ATTEMPT_RETENTION_DAYS = env_number("HERALD_ATTEMPT_RETENTION_DAYS", 30)
HERALD_MESSAGE_RETENTION_DAYS = env_number("HERALD_MESSAGE_RETENTION_DAYS", 30)
# Engine tuning (internal; documented in docs/architecture.md).
HERALD_MAX_IN_FLIGHT = env_number("HERALD_MAX_IN_FLIGHT", 512)
HERALD_MAX_IN_FLIGHT_PER_ENDPOINT = env_number("HERALD_MAX_IN_FLIGHT_PER_ENDPOINT", 32)
HERALD_PUMP_SECONDS = env_number("HERALD_PUMP_SECONDS", 60, float)
HERALD_PUMP_LINGER_SECONDS = env_number("HERALD_PUMP_LINGER_SECONDS", 1.0, float)
HERALD_CA_BUNDLE = os.environ.get("HERALD_CA_BUNDLE", "")
HERALD_SEND_START_WINDOW_SECONDS = env_number("HERALD_SEND_START_WINDOW_SECONDS", 10.0, float)
HERALD_INLINE_FANOUT = env_number("HERALD_INLINE_FANOUT", 500)
HERALD_LEASE_MARGIN_SECONDS = env_number("HERALD_LEASE_MARGIN_SECONDS", 30)
HERALD_RECONCILE_AFTER_SECONDS = env_number("HERALD_RECONCILE_AFTER_SECONDS", 60)
HERALD_RECONCILE_INTERVAL_SECONDS = env_number("HERALD_RECONCILE_INTERVAL_SECONDS", 5.0, float)
HERALD_JOB_TIMEOUT_SECONDS = env_number("HERALD_JOB_TIMEOUT_SECONDS", 900)
HERALD_PUBLIC_URL = os.environ.get("HERALD_PUBLIC_URL", "http://127.0.0.1:8000")
HERALD_METRICS_TOKEN = os.environ.get("HERALD_METRICS_TOKEN", "")

# HERALD_LOG_FORMAT=json: one JSON object per line (attempt lines carry their fields at the top level).
# RQ's own per-job lines ("Job OK") are off unless RQ_LOG_LEVEL=INFO: each attempt has its own line instead.
HERALD_LOG_FORMAT = os.environ.get("HERALD_LOG_FORMAT", "text")
HERALD_RQ_LOG_LEVEL = os.environ.get("RQ_LOG_LEVEL", "WARNING")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "project.logformat.JSONFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             "formatter": "json" if HERALD_LOG_FORMAT == "json" else "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"rq.worker": {"level": HERALD_RQ_LOG_LEVEL}},
}

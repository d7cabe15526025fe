"""Herald's settings, each with its default, in one place. Read lazily: `herald.REQUIRE_CONFIRMATION` looks up
`settings.HERALD_REQUIRE_CONFIRMATION` the first time it is used and falls back to the default here, so a host
project sets only what it changes; the value is kept until Django's settings change (`override_settings` and
pytest-django's `settings` apply at once; assigning to `django.conf.settings` directly does not).

`from_environment(os.environ)` reads `HERALD_*` variables into settings (typed by their defaults); Herald's own
settings module uses it, and a host project may too."""

import threading

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from delivery import VERSION  # noqa: F401 (its old home: `from delivery.conf import VERSION`)

DEFAULTS: dict[str, object] = {
    # Delivery policy for subscriptions and topics without their own: a preset name or a policy's JSON.
    "DEFAULT_DELIVERY_POLICY": "workfront",
    # New subscriptions must confirm their endpoint (the handshake) before anything is delivered to it.
    "REQUIRE_CONFIRMATION": True,
    "MAX_PAYLOAD_BYTES": 262_144,
    # The most evaluation one payload's check against its event type's schema may cost (units: a keyword checked,
    # plus what it loops over); past it the publish is refused with a 400 (docs/tenants.md).
    "SCHEMA_CHECK_BUDGET": 20_000,
    # Networks deliveries may reach besides public addresses (e.g. "10.0.0.0/8"); private ones are refused.
    "ALLOWED_NETWORKS": [],
    # Endpoint health: disable above this failure rate over the window (with enough attempts), freeze after these.
    "DISABLE_FAILURE_RATE": 0.70,
    "DISABLE_MIN_ATTEMPTS": 100,
    "DISABLE_CONSECUTIVE_FAILURES": 2000,
    "FREEZE_CONSECUTIVE_FAILURES": 2000,
    "FREEZE_SILENCE_SECONDS": 259_200,
    "FREEZE_ABSOLUTE_FAILURES": 50_000,
    "PROBE_INTERVAL_SECONDS": 600,
    "RATE_WINDOW_SECONDS": 86_400,
    "DISPATCH_INTERVAL_SECONDS": 1.0,
    "ATTEMPT_RETENTION_DAYS": 30,
    "MESSAGE_RETENTION_DAYS": 30,
    "MAX_REPLAY_MESSAGES": 100_000,
    # Per-owner quotas (docs/security.md): a tenant's share of what everyone shares.
    "MAX_SUBSCRIPTIONS_PER_OWNER": 100_000,
    "MAX_REPLAYS_PER_HOUR": 10,
    "MAX_REPLAYS_PER_SUBSCRIPTION_PER_HOUR": 3,
    "RESEND_INTERVAL_SECONDS": 60,
    # Tenants (docs/tenants.md): how many an owner may register, and each tenant's share of its owner's.
    "MAX_TENANTS_PER_OWNER": 100_000,
    "MAX_ENDPOINTS_PER_TENANT": 20,
    # What `delivery.events.publish(..., tenant=…)` does with a tenant not registered yet: "record" (kept for the
    # owner's own subscriptions, a warning logged), "create" (registered now) or "refuse" (PublishError). The API
    # refuses unless the body says otherwise (docs/tenants.md).
    "PUBLISH_UNKNOWN_TENANT": "record",
    "MAX_SUBSCRIPTIONS_PER_TENANT": 100,
    "MAX_REPLAYS_PER_TENANT_PER_HOUR": 5,
    "MAX_KEYS_PER_TENANT": 10,
    "MAX_TEST_EVENTS_PER_HOUR": 10,
    # The longest a portal link lasts, in seconds (an owner asks for less).
    "PORTAL_LINK_MAX_SECONDS": 7 * 86_400,
    # Hosts an expired portal link may send a browser straight to (an owner's refresh_url, docs/tenants.md); to any
    # other the portal shows a page on Herald's origin naming where the link leads, which the tenant clicks.
    "PORTAL_REFRESH_HOSTS": [],
    "MAX_RESENDS_PER_HOUR": 30,
    # Confirmation requests (handshakes: a new subscription, a changed endpoint or token URL, a resend) per clock
    # hour: an owner's, its tenants' included, and each tenant's own (docs/security.md, "Per-owner quotas").
    "MAX_HANDSHAKES_PER_HOUR": 1000,
    "MAX_HANDSHAKES_PER_TENANT_PER_HOUR": 100,
    # Engine tuning (docs/architecture.md).
    "MAX_IN_FLIGHT": 512,
    "MAX_IN_FLIGHT_PER_ENDPOINT": 32,
    # A send unanswered this long gives its slot back and counts against its endpoint's room only (send shares).
    "STALLED_SEND_SECONDS": 1.0,
    # Name lookups (docs/architecture.md, "Name lookups"): the transport's own threads, divided in shares; how long
    # one may take; how long an answer is kept.
    "DNS_THREADS": 8,
    "DNS_TIMEOUT_SECONDS": 5.0,
    "DNS_CACHE_SECONDS": 30.0,
    # Transformations (docs/transformations.md): the worker's threads that run them, divided in shares; each call's
    # time and memory; the largest code a subscription may save and the largest webhook a handler may return.
    "TRANSFORM_THREADS": 2,
    "TRANSFORM_TIMEOUT_MS": 50,
    "TRANSFORM_MEMORY_MB": 64,
    "TRANSFORM_CODE_MAX_BYTES": 65_536,
    "TRANSFORM_OUTPUT_MAX_BYTES": 262_144,
    "PUMP_SECONDS": 60.0,
    "PUMP_LINGER_SECONDS": 1.0,
    # While publishes arrive steadily (a wake less than this + 45 ms after the previous one), a pump woken by one waits
    # this long before it claims, so that one claim takes what arrives meanwhile, and one pump of the processes
    # does (docs/architecture.md, "Rounds"). 0: every wake claims at once.
    "PUMP_GATHER_MS": 30,
    "CA_BUNDLE": "",
    # Every delivery through this HTTP proxy (e.g. "http://egress.internal:3128"), so requests leave from its fixed
    # addresses; the address guard still checks every destination (docs/security.md).
    "EGRESS_PROXY": "",
    "SEND_START_WINDOW_SECONDS": 10.0,
    "INLINE_FANOUT": 500,
    "LEASE_MARGIN_SECONDS": 30,
    "RECONCILE_AFTER_SECONDS": 60,
    "RECONCILE_INTERVAL_SECONDS": 5.0,
    "JOB_TIMEOUT_SECONDS": 900,
    # Where workers and the scheduler touch their heartbeat files (`manage.py herald_alive`); empty: the system's
    # temporary directory.
    "HEARTBEAT_DIR": "",
    # Where your site is reached from outside (scheme, host, port; a path of Herald's mount may follow): the base
    # of the links Herald hands out, the confirmation links in handshakes and the tenants' portal links.
    "PUBLIC_URL": "http://127.0.0.1:8000",
    # Bearer token for GET /metrics (Prometheus); empty: the endpoint is off.
    "METRICS_TOKEN": "",
    "LOG_FORMAT": "text",
    "RQ_LOG_LEVEL": "WARNING",
    # Publishes per minute per user through the API (DRF rate syntax).
    "PUBLISH_RATE": "6000/min",
    # Herald's own events (endpoint disabled, frozen, recovered; delivery dead-lettered) go to this topic of
    # OPERATIONAL_EVENTS_OWNER's, when both are set (docs/embedding.md).
    "OPERATIONAL_EVENTS_TOPIC": "",
    "OPERATIONAL_EVENTS_OWNER": "",
    # Fernet keys encrypting signing secrets at rest, newest first (subscriptions/secrets.py reads this setting;
    # empty: a key derived from SECRET_KEY).
    "SECRET_KEYS": [],
    # publish("name", …) from code: whose topic of that name (a username), and whether a missing one is created.
    "PUBLISH_OWNER": "",
    "CREATE_TOPICS_ON_PUBLISH": False,
}
# Environment variables whose name is not HERALD_ + the setting's.
ENVIRONMENT_NAMES = {"RQ_LOG_LEVEL": "RQ_LOG_LEVEL"}
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


class HeraldSettings:
    """`herald.NAME`: `settings.HERALD_NAME` if the project sets it, else the default. Each is read from Django's
    settings once, then kept as an attribute of this object (through Django's settings a read cost 3-5 µs, and a
    delivery reads dozens); a change of Django's settings (`override_settings`, pytest-django's `settings`)
    forgets them all. A read that raced with such a change keeps nothing."""

    _lock = threading.Lock()
    _changes = 0  # settings changes so far

    def __getattr__(self, name: str):
        if name not in DEFAULTS:
            raise AttributeError(f"Herald has no setting {name!r}")
        seen = HeraldSettings._changes
        value = getattr(django_settings, f"HERALD_{name}", DEFAULTS[name])
        with self._lock:
            if HeraldSettings._changes == seen:
                self.__dict__[name] = value
        return value

    def forget(self) -> None:
        with self._lock:
            HeraldSettings._changes += 1
            self.__dict__.clear()


herald = HeraldSettings()


@receiver(setting_changed)
def _settings_changed(**kwargs) -> None:
    herald.forget()


def public_url(path: str) -> str:
    """The link to `path` (a `reverse()`, with Herald's mount prefix) as the outside reaches it: HERALD_PUBLIC_URL
    in front. A PUBLIC_URL that already ends in the mount prefix (`https://shop.example/herald`) is not doubled."""
    base = str(herald.PUBLIC_URL).rstrip("/")
    prefix = base.split("://", 1)[-1].partition("/")[2]
    if prefix and (path == f"/{prefix}" or path.startswith(f"/{prefix}/")):
        path = path[len(prefix) + 1:]
    return f"{base}{path}"


def parse(name: str, raw: str):
    """An environment variable's text as the type of the setting's default."""
    default = DEFAULTS[name]
    if isinstance(default, bool):
        value = raw.strip().lower()
        if value in TRUE | FALSE:
            return value in TRUE
        raise ImproperlyConfigured(f"HERALD_{name} must be true or false, not {raw!r}")
    if isinstance(default, (int, float)):
        try:
            return type(default)(raw)
        except ValueError:
            raise ImproperlyConfigured(f"HERALD_{name} must be a number, not {raw!r}") from None
    if isinstance(default, list):
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


def from_environment(environ) -> dict[str, object]:
    """{"HERALD_NAME": value} for every Herald setting set (non-empty) in `environ`."""
    found = {}
    for name in DEFAULTS:
        raw = environ.get(ENVIRONMENT_NAMES.get(name, f"HERALD_{name}"))
        if raw not in (None, ""):
            found[f"HERALD_{name}"] = parse(name, raw)
    return found

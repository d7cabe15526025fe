"""The per-user publish rate (HERALD_PUBLISH_RATE, e.g. "6000/min", or REST_FRAMEWORK's DEFAULT_THROTTLE_RATES
["publish"] where a project sets it), shared by every web process.

A fixed-window counter in Redis: one INCR and EXPIRE in one round trip, the same cost at any rate. (DRF's
`UserRateThrottle` keeps every request's time in a pickled list it reads and rewrites whole on each request: at
thousands a minute that costs more than the publish itself.) A batch counts its entries. Across a window's edge up
to twice the rate can pass in one window's length; the limit is a guard against runaway publishers, not a shaper.

Test-runs of transformations are counted the same way (TRANSFORMATION_TEST_RATE, or DEFAULT_THROTTLE_RATES
["transformation_test"]), per user and, for a tenant's key, per tenant: each costs up to a transformation's time
limit of CPU in the web process. Previews of an event version upgrade likewise (EVENT_VERSION_PREVIEW_RATE, or
DEFAULT_THROTTLE_RATES["event_version_preview"]): each runs the catalog's down-converters once or twice.
"""

import time

from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from delivery.conf import herald
from delivery.engine.plumbing import redis_link
from delivery.web.api.ownership import tenant_of

KEY = "herald:publish-rate:{user}:{window}"
TRANSFORMATION_TEST_KEY = "herald:transformation-test-rate:{user}:{window}"
TRANSFORMATION_TEST_RATE = "60/min"
EVENT_VERSION_PREVIEW_KEY = "herald:event-version-preview-rate:{user}:{window}"
EVENT_VERSION_PREVIEW_RATE = "60/min"


class WindowThrottle(BaseThrottle):
    """A fixed window per user in Redis: `scope`'s rate from DEFAULT_THROTTLE_RATES where a project sets it, else
    `default_rate()`; what a request counts, `counted`."""

    scope = ""
    key = ""
    rate: str | None = None  # None: DEFAULT_THROTTLE_RATES[scope], else default_rate()

    def default_rate(self) -> str:
        raise NotImplementedError

    def who(self, request) -> str:
        return str(request.user.pk)

    def counted(self, request, view) -> int:
        return 1

    def allow_request(self, request, view) -> bool:
        return self.allow(self.who(request), self.counted(request, view))

    def allow(self, who: str, count: int = 1) -> bool:
        """Whether `who` may spend `count` more in this window (spent either way); any door may ask."""
        rate = self.rate or api_settings.DEFAULT_THROTTLE_RATES.get(self.scope) or self.default_rate()
        limit, period = SimpleRateThrottle.parse_rate(None, rate)
        now = time.time()
        key = self.key.format(user=who, window=int(now // period))
        with redis_link.connection().pipeline(transaction=False) as pipe:  # (a MULTI added nothing but its cost)
            used, _ = pipe.incrby(key, count).expire(key, period + 1).execute()
        self.seconds_left = period - now % period
        return used <= limit

    def wait(self) -> float:
        return self.seconds_left


class PublishRateThrottle(WindowThrottle):
    """Publishes, per user (a tenant's key counts toward its owner's): HERALD_PUBLISH_RATE; a batch counts its
    entries."""

    scope = "publish"
    key = KEY

    def default_rate(self) -> str:
        return herald.PUBLISH_RATE

    def counted(self, request, view) -> int:
        if getattr(view, "action", "") == "publish_batch" and isinstance(request.data, dict):
            entries = request.data.get("entries")
            return max(1, len(entries)) if isinstance(entries, list) else 1
        return 1


class SandboxRunThrottle(WindowThrottle):
    """Runs of code in the web process's sandbox, per user; with a tenant's key, per tenant (the portal asks with
    `allow(tenant_runner(tenant))`: a tenant's runs count the same wherever it makes them)."""

    def who(self, request) -> str:
        access = tenant_of(request)
        return tenant_runner(access.tenant) if access is not None else str(request.user.pk)


def tenant_runner(tenant) -> str:
    return f"{tenant.owner_id}:tenant:{tenant.pk}"


class TransformationTestThrottle(SandboxRunThrottle):
    """Test-runs of transformations."""

    scope = "transformation_test"
    key = TRANSFORMATION_TEST_KEY

    def default_rate(self) -> str:
        return TRANSFORMATION_TEST_RATE


class EventVersionPreviewThrottle(SandboxRunThrottle):
    """Previews of an event version upgrade."""

    scope = "event_version_preview"
    key = EVENT_VERSION_PREVIEW_KEY

    def default_rate(self) -> str:
        return EVENT_VERSION_PREVIEW_RATE

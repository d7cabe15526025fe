"""The per-user publish rate (HERALD_PUBLISH_RATE, e.g. "6000/min", or REST_FRAMEWORK's DEFAULT_THROTTLE_RATES
["publish"] where a project sets it), shared by every web process.

A fixed-window counter in Redis: one INCR and EXPIRE in one round trip, the same cost at any rate. (DRF's
`UserRateThrottle` keeps every request's time in a pickled list it reads and rewrites whole on each request: at
thousands a minute that costs more than the publish itself.) A batch counts its entries. Across a window's edge up
to twice the rate can pass in one window's length; the limit is a guard against runaway publishers, not a shaper.
"""

import time

from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from delivery.conf import herald
from delivery.engine.plumbing import redis_link

KEY = "herald:publish-rate:{user}:{window}"


class PublishRateThrottle(BaseThrottle):
    scope = "publish"
    rate: str | None = None  # None: DEFAULT_THROTTLE_RATES["publish"], else HERALD_PUBLISH_RATE

    def allow_request(self, request, view) -> bool:
        rate = self.rate or api_settings.DEFAULT_THROTTLE_RATES.get(self.scope) or herald.PUBLISH_RATE
        limit, period = SimpleRateThrottle.parse_rate(None, rate)
        now = time.time()
        key = KEY.format(user=request.user.pk, window=int(now // period))
        messages = 1
        if getattr(view, "action", "") == "publish_batch" and isinstance(request.data, dict):
            entries = request.data.get("entries")
            messages = max(1, len(entries)) if isinstance(entries, list) else 1
        with redis_link.connection().pipeline() as pipe:
            used, _ = pipe.incrby(key, messages).expire(key, period + 1).execute()
        self.seconds_left = period - now % period
        return used <= limit

    def wait(self) -> float:
        return self.seconds_left

"""Per-subscription throttling (`throttlePolicy.maxReceivesPerSecond`), enforced across all workers and hosts.

A sliding one-second log per subscription lives in Redis and is updated by one atomic Lua script that reads the
Redis server's clock, so workers on different hosts agree. A delivery that gets no slot is deferred to the time the
next slot frees: it is not an attempt and no worker waits for it.
"""


from delivery.engine.plumbing import redis_link
from delivery.rules.vocabulary import AttemptQueue

# KEYS[1] = log key; ARGV = rate, wanted, window in microseconds, unique member prefix.
# Returns {granted, wait_microseconds}.
SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate, wanted, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
local granted = math.min(wanted, math.max(rate - used, 0))
for i = 1, granted do
  redis.call('ZADD', KEYS[1], now, ARGV[4] .. ':' .. i)
end
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000) + 1000)
local wait = 0
if granted < wanted then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wait = tonumber(oldest[2]) + window - now
end
return {granted, wait}
"""
# A slot is held slightly longer than a second, and a send must start within START_SLACK_SECONDS of its grant (else it
# goes back unsent, not an attempt), so that two sends on the same slot start more than a second apart and a loaded
# worker's late sends cannot crowd the next window at the receiver.
WINDOW_SECONDS = 1.1
START_SLACK_SECONDS = WINDOW_SECONDS - 1.0
_script = None


def acquire(subscription_id: int, rate: int, wanted: int, token: str) -> tuple[int, float]:
    """Ask for `wanted` send slots; returns (slots granted, seconds until the next slot frees if some were not)."""
    global _script
    connection = redis_link.connection(AttemptQueue.DELIVERIES)
    if _script is None or _script.registered_client is not connection:
        _script = connection.register_script(SCRIPT)
    granted, wait = _script(keys=[f"herald:throttle:{subscription_id}"],
                            args=[rate, wanted, int(WINDOW_SECONDS * 1_000_000), token])
    return int(granted), int(wait) / 1_000_000

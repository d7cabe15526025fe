"""Name lookups for the transport, none of them on a thread others share (docs/architecture.md, "Name lookups").

The system resolver (`getaddrinfo`) blocks a thread for as long as a name server takes, and a tenant chooses its
endpoint's name, so it chooses its name server too: one that answers in 6 s held the event loop's default executor
(shared with everything else the loop runs off-thread) and slowed every tenant's sends to names. Here:

- lookups run on the transport's own pool of HERALD_DNS_THREADS threads, never the loop's default executor;
- the pool is divided in shares like the send slots (`rules/send_shares.rooms`: max-min fair across owners, then
  across each owner's shares, with a reserve kept for an owner that has no lookup running), so one owner's slow
  names, however many of its tenants they are spread over, hold at most its part of the threads; a lookup whose
  deadline passed still counts against its share until its thread comes back, because that thread is still busy;
- each lookup has a deadline (HERALD_DNS_TIMEOUT_SECONDS; the send's own deadline still bounds it): past it the
  send fails as `dns`, retried by its policy, counted against its endpoint like any failure;
- answers are kept HERALD_DNS_CACHE_SECONDS (positive answers only: a name that fails is asked again), and
  concurrent lookups of one name share one thread.

The share a lookup belongs to comes from the send that needs it (`SHARE`, set by the transport in the send's task;
aiohttp resolves inside that task's context). Addresses are checked by the guard (`ssrf.py`) on every use, cached
or not, so a change of HERALD_ALLOWED_NETWORKS applies at once.
"""

import asyncio
import contextvars
import time
from collections import OrderedDict

from delivery.rules import send_shares
from delivery.transport import ssrf
from delivery.transport.shared_threads import SharedThreads
from delivery.transport.ssrf import Address, Unresolvable

SHARE = contextvars.ContextVar("herald_lookup_share", default=send_shares.UNSHARED)
CACHE_ENTRIES = 4096


def system_resolver(host: str, port: int) -> list[Address]:
    """The guard's resolver (`ssrf.resolve`: getaddrinfo), looked up at each call."""
    return ssrf.resolve(host, port)


class Lookups:
    """One process's name lookups: a pool of threads in shares, a deadline, a short positive cache."""

    def __init__(self, *, threads: int, timeout: float, cache_seconds: float, resolver=None):
        self.threads, self.timeout, self.cache_seconds = threads, timeout, cache_seconds
        self.resolver = resolver or system_resolver  # (host, port) -> [addresses], blocking
        self.shared = SharedThreads(threads, name="herald-dns")  # the threads, in shares
        self.cache: OrderedDict = OrderedDict()  # (host, port) -> (addresses, kept until: monotonic)
        self.running: dict = {}  # (host, port) -> the asyncio future of its lookup, shared by those who ask

    @property
    def busy(self):
        return self.shared.busy

    async def addresses(self, host: str, port: int) -> list[Address]:
        """What `host` resolves to, from the cache or a lookup within the deadline; Unresolvable otherwise."""
        key = (host, port)
        kept = self.cache.get(key)
        if kept is not None and kept[1] > time.monotonic():
            return kept[0]
        share = SHARE.get()
        try:
            async with asyncio.timeout(self.timeout):
                found = self.running.get(key)
                if found is None:
                    found = await self._start(key, share)
                addresses = await asyncio.shield(found)
        except TimeoutError:
            raise Unresolvable(f"{host} did not resolve within {self.timeout:g} s") from None
        return addresses

    async def _start(self, key: tuple[str, int], share) -> asyncio.Future:
        """A thread for this lookup once the share has room for one (waiting, within the deadline, for a thread
        of its part to come back)."""
        await self.shared.wait_for_room(share, done=lambda: key in self.running or self._kept(key) is not None)
        if key in self.running:  # someone else started it meanwhile
            return self.running[key]
        kept = self._kept(key)
        if kept is not None:  # answered meanwhile
            answered = asyncio.get_running_loop().create_future()
            answered.set_result(kept)
            return answered
        future = self.shared.run(share, self.resolver, *key)
        self.running[key] = future
        self.shared.wake()  # whoever waits for a thread to look this name up joins this lookup instead
        future.add_done_callback(lambda done: self._came_back(key, done))
        return future

    def _kept(self, key):
        """The cached addresses of `key` while they are fresh, else None."""
        kept = self.cache.get(key)
        return kept[0] if kept is not None and kept[1] > time.monotonic() else None

    def _room_for(self, share) -> bool:
        """Whether `share` may start a lookup now (shared_threads.SharedThreads.room_for)."""
        return self.shared.room_for(share)

    def _came_back(self, key, done: asyncio.Future) -> None:
        """On the loop: its answer is kept if it is one."""
        if self.running.get(key) is done:
            del self.running[key]
        if not done.cancelled() and done.exception() is None and self.cache_seconds > 0:
            self.cache[key] = (done.result(), time.monotonic() + self.cache_seconds)
            self.cache.move_to_end(key)
            while len(self.cache) > CACHE_ENTRIES:
                self.cache.popitem(last=False)
        elif not done.cancelled():
            done.exception()  # retrieved: a failed lookup is its askers' error, not an unretrieved one

    def close(self) -> None:
        self.shared.close()

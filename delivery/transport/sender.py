"""The HTTP sender: many POSTs in flight from one event loop, never a redirect, a result value instead of an exception.

Each process has one `Transport`: an asyncio event loop on its own thread with one aiohttp session (keep-alive
pools per host). Callers on other threads `submit()` a request and get a `concurrent.futures.Future`, so the attempt
path can record results as they complete while hundreds of requests are in flight. One request on the wire and
its answer are `posting.py`'s; TLS contexts are `tls.py`'s; what a failure is called, `failures.py`'s.

What every send guarantees:
- the connection goes only to an address the SSRF guard checked (`ssrf.GuardedResolver`; IP literals are checked
  before the request), with the Host header, TLS SNI and certificate check on the URL's name;
- one deadline for the whole request (connect, send, headers, body), however the endpoint drips its answer;
- bounded reads: headers up to MAX_FIELD_BYTES each, the body read up to DRAIN_LIMIT and only EXCERPT_BYTES kept;
- no redirects, no proxies or credentials from the environment, no cookies kept between endpoints;
- with HERALD_EGRESS_PROXY, every request leaves through that proxy, addressed to the IP the guard checked (CONNECT
  `ip:port` for HTTPS, with SNI and the certificate check on the name; an absolute `http://ip:port/…` for HTTP, with
  the name in Host), so the proxy never resolves a name and cannot be a way around the guard;
- a per-endpoint concurrency limit, so one slow endpoint cannot take every slot. A send that cannot start before
  its `start_by` (its endpoint's slots stayed busy) is not sent at all: its future answers None, not an attempt;
- slots counted by share: `active` and `active_by_share()` are the sends holding one of the process's slots, per
  (owner, tenant) (rules/send_shares.py divides the slots among the shares). A send unanswered after
  HERALD_STALLED_SEND_SECONDS gives its slot back and counts against its endpoint's room only, so endpoints that
  accept connections and never answer hold none of the slots everyone shares.
"""

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import functools
import threading
import time
from collections import Counter

import aiohttp

from delivery.conf import herald
from delivery.rules import send_shares
from delivery.rules.vocabulary import ErrorClass
from delivery.rules.wire import OutgoingRequest
from delivery.transport import descriptors, posting
from delivery.transport.lookups import SHARE, Lookups
from delivery.transport.posting import MAX_FIELD_BYTES, SendResult, allowed_networks, proxy_host
from delivery.transport.ssrf import GuardedResolver
from delivery.transport.stalls import StalledSends
from delivery.transport.transforms import Transforms

# Stalled sends a process keeps open beyond its slots, per slot: past it a send that stalls is cut short (a bound on
# open connections, whatever number of endpoints stop answering, that never takes a slot from a fresh delivery).
STALLED_PER_SLOT = 4


class _Slot:
    """A send's hold on one of the process's slots, given back once: when it is answered or when it stalls."""

    __slots__ = ("share", "held", "semaphore", "cut")

    def __init__(self, share):
        self.share, self.held, self.semaphore, self.cut = share, True, False, None


class Transport:
    """One event loop thread and one HTTP session for the process."""

    def __init__(self, *, max_in_flight: int, per_endpoint: int, stalled_after: float | None = None,
                 lookups: Lookups | None = None, max_stalled: int | None = None):
        self.max_in_flight = max_in_flight
        self.per_endpoint = per_endpoint
        self.stalled_after = float(herald.STALLED_SEND_SECONDS if stalled_after is None else stalled_after)
        self._pending = 0  # submitted, not yet answered (read from other threads)
        self._active = 0  # submitted, not yet answered nor stalled: holding a slot
        self._active_by_share: Counter = Counter()
        # sends that gave their slot back, still waiting: open connections beyond the slots, in shares (stalls.py)
        self.stalled_sends = StalledSends(STALLED_PER_SLOT * max_in_flight if max_stalled is None else max_stalled)
        self.stalls = 0  # how many sends have stalled so far (the pump looks again when it moves: a slot came free)
        self._lock = threading.Lock()
        self._endpoint_slots: dict = {}  # key -> [semaphore, users]
        self._starting: list = []  # submitted, not yet started on the loop: (future, context, the send's arguments)
        self._tasks: set = set()  # the sends running on the loop
        self.lookups = lookups or Lookups(threads=int(herald.DNS_THREADS), timeout=float(herald.DNS_TIMEOUT_SECONDS),
                                          cache_seconds=float(herald.DNS_CACHE_SECONDS))
        self.transforms = Transforms(threads=int(herald.TRANSFORM_THREADS))
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), name="herald-transport", daemon=True)
        self.thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._open())
        finally:
            started.set()
        self.loop.run_forever()

    async def _open(self) -> None:
        self.slots = asyncio.Semaphore(self.max_in_flight)
        # at most as many connections at once as sends may be in flight or stalled (descriptors.py's budget)
        connector = aiohttp.TCPConnector(limit=self.max_in_flight + self.max_stalled, use_dns_cache=False,
                                         resolver=GuardedResolver(allowed_networks, self.lookups.addresses,
                                                                  exempt=proxy_host),
                                         keepalive_timeout=30, enable_cleanup_closed=True)
        self.session = aiohttp.ClientSession(
            connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
            max_line_size=MAX_FIELD_BYTES, max_field_size=MAX_FIELD_BYTES,
            skip_auto_headers=("User-Agent", "Accept-Encoding"))

    @property
    def pending(self) -> int:
        """Sends submitted and not yet answered, stalled ones included."""
        return self._pending

    @property
    def active(self) -> int:
        """Sends holding one of the process's slots: submitted, not yet answered nor stalled."""
        return self._active

    def active_by_share(self) -> Counter:
        with self._lock:
            return Counter(self._active_by_share)

    def submit(self, request: OutgoingRequest, *, timeout: float, key=None, share=None,
               start_by: float | None = None) -> concurrent.futures.Future:
        """Send `request` on the loop. `key` names its endpoint for the per-endpoint limit, `share` its (owner,
        tenant) for the share of slots; `start_by` is a monotonic time after which it is not sent (the future then
        answers None)."""
        slot = _Slot(share)
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.add_done_callback(self._done)
        # A claim's sends are submitted in a burst: the first wakes the loop, the rest join it (one wake-up, not
        # one per send). Each starts in the context it was submitted from.
        with self._lock:
            self._pending += 1
            self._active += 1
            self._active_by_share[share] += 1
            if not self._starting:  # the wake-up first: a submit cut short after it leaves an empty wake-up only
                self.loop.call_soon_threadsafe(self._start_submitted)
            self._starting.append((future, contextvars.copy_context(), (request, timeout, key, start_by, slot)))
        return future

    def _start_submitted(self) -> None:
        """On the loop: a task for each send submitted since the last wake-up, its answer passed to its future."""
        with self._lock:
            starting, self._starting = self._starting, []
        for future, context, (request, timeout, key, start_by, slot) in starting:
            if future.cancelled():  # before it started (a send that started runs to its answer)
                self._give_back(slot)
                continue
            task = self.loop.create_task(self._send(request, timeout, key, start_by, slot), context=context)
            self._tasks.add(task)  # the loop holds its tasks weakly
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(functools.partial(_answer, future))

    def _done(self, _future) -> None:
        with self._lock:
            self._pending -= 1

    @property
    def max_stalled(self) -> int:
        return self.stalled_sends.limit

    def _stall(self, slot: _Slot) -> None:
        """Unanswered past the bound: the slot goes back and the send waits on, counted against its endpoint. At
        the process's bound on stalled sends, Herald ends one (stalls.py), owners first: this one if its owner and
        share hold the most, else the oldest of the share that does, so that a fresh delivery still finds a slot
        whatever stops answering and no owner loses a send to another's silence. (Its endpoint's room still counts
        a stalled send: the claim's in-flight count is of every send not yet ended.)"""
        cut = self.stalled_sends.add(slot)  # (a send it ends is no longer counted: it ends on the loop's next turn)
        if cut is not None and cut.cut is not None:
            cut.cut.reschedule(self.loop.time())
        if cut is slot:
            return
        with self._lock:
            self.stalls += 1
        self._give_back(slot)

    def _give_back(self, slot: _Slot) -> None:
        """The slot is free for others (on the loop): the send was answered, stalled or never started."""
        if slot.semaphore:
            slot.semaphore = False
            self.slots.release()
        if slot.held:
            slot.held = False
            with self._lock:
                self._active -= 1
                self._active_by_share[slot.share] -= 1
                if self._active_by_share[slot.share] <= 0:
                    del self._active_by_share[slot.share]

    async def _send(self, request, timeout, key, start_by, slot: _Slot) -> SendResult | None:
        SHARE.set(slot.share or send_shares.UNSHARED)  # whose share of the lookup threads this send's name lookup takes
        if request.rendering is None:
            return await self._send_as_built(request, timeout, key, start_by, slot)
        rendered = None
        try:  # its transformation first, on the transformation threads in its share; then the request it built
            rendered = await self.transforms.rendered(request, slot.share or send_shares.UNSHARED, start_by)
        finally:
            if not isinstance(rendered, OutgoingRequest):  # not started in time, ended, or raised
                self._give_back(slot)
        if not isinstance(rendered, OutgoingRequest):
            return rendered
        result = await self._send_as_built(rendered, timeout, key, start_by, slot)
        return result if result is None else dataclasses.replace(result, sent=rendered)

    async def _send_as_built(self, request, timeout, key, start_by, slot: _Slot) -> SendResult | None:
        entry = self._endpoint_slots.setdefault(key, [asyncio.Semaphore(self.per_endpoint), 0])
        entry[1] += 1
        stall = None
        try:
            wait = None if start_by is None else max(0.0, start_by - time.monotonic())
            try:
                async with asyncio.timeout(wait):
                    await entry[0].acquire()
                    try:
                        await self.slots.acquire()
                    except BaseException:
                        entry[0].release()
                        raise
            except TimeoutError:
                return None  # its endpoint stayed busy: not sent, so not an attempt
            slot.semaphore = True
            if start_by is not None and time.monotonic() > start_by:  # the loop itself got to it too late
                entry[0].release()
                return None
            stall = self.loop.call_later(self.stalled_after, self._stall, slot)
            began = time.time()
            try:
                async with asyncio.timeout(None) as slot.cut:
                    return await self._post_authorized(request, timeout)
            except TimeoutError:  # ended by Herald: its share held the most of the process's stalled sends
                return SendResult(status=None, duration_ms=int((time.time() - began) * 1000), started_at=began,
                                  error_class=ErrorClass.CUT_SHORT,
                                  error_detail=f"no answer within {self.stalled_after:g} s while this process held "
                                               f"its most stalled sends ({self.max_stalled}), the most of them for "
                                               f"this share; ended by Herald (not counted against the endpoint or "
                                               f"the delivery's attempts)")
            finally:
                entry[0].release()
        finally:
            if stall is not None:
                stall.cancel()
            self.stalled_sends.remove(slot)
            self._give_back(slot)
            entry[1] -= 1
            if entry[1] == 0:
                self._endpoint_slots.pop(key, None)

    async def _post_authorized(self, request: OutgoingRequest, timeout: float) -> SendResult:
        return await posting.post_authorized(self.session, self.lookups, request, timeout)

    async def post(self, request: OutgoingRequest, timeout: float) -> SendResult:
        """One POST on the loop, under `timeout` for all of it; never raises (a failure is a result)."""
        return await posting.post(self.session, self.lookups, request, timeout)

    def close(self) -> None:
        async def shut():
            await self.session.close()
        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.lookups.close()
        self.transforms.close()


def _answer(future: concurrent.futures.Future, task: asyncio.Task) -> None:
    """A send's task is done: its future gets the answer (or is cancelled with it, as the loop shuts down). A send
    that raised, which none should, answers as Herald's own failure: one send, not the pump that waits on it."""
    if task.cancelled():
        future.cancel()
    elif future.set_running_or_notify_cancel():
        exc = task.exception()
        if exc is not None:
            future.set_result(SendResult(status=None, duration_ms=0, started_at=time.time(),
                                         error_class=ErrorClass.INTERNAL,
                                         error_detail=f"the send failed inside Herald ({type(exc).__name__})"))
        else:
            future.set_result(task.result())


_transport: Transport | None = None
_transport_lock = threading.Lock()


def process_budget() -> descriptors.Budget:
    """What this process may keep open, against its limit on open files (raised to the hard limit at start)."""
    return descriptors.budget(descriptors.raise_soft_limit(), max_in_flight=int(herald.MAX_IN_FLIGHT),
                              stalled_per_slot=STALLED_PER_SLOT)


def transport() -> Transport:
    global _transport
    if _transport is None:
        with _transport_lock:
            if _transport is None:
                sized = process_budget()
                _transport = Transport(max_in_flight=sized.in_flight, max_stalled=sized.stalled,
                                       per_endpoint=herald.MAX_IN_FLIGHT_PER_ENDPOINT)
    return _transport


def close_transport() -> None:
    """Close the process's transport (its loop, its connections, its lookup threads); the next `transport()` makes
    a new one."""
    global _transport
    with _transport_lock:
        closing, _transport = _transport, None
    if closing is not None:
        closing.close()


def submit(request: OutgoingRequest, *, timeout: float, key=None, share=None,
           start_by=None) -> concurrent.futures.Future:
    return transport().submit(request, timeout=timeout, key=key, share=share, start_by=start_by)


def send(request: OutgoingRequest, *, timeout: float) -> SendResult:
    """One request, waited for (confirmation handshakes, tools)."""
    return submit(request, timeout=timeout).result()

"""A pool of threads divided in shares (the name lookups' and the transformations'): a share starts work on a thread
only within its room (`rules/send_shares.rooms`: max-min fair across owners, then across each owner's shares, every
share with work running counted as wanting more), and an owner that already has work running leaves the reserve to
an owner that has none, so one owner's slow work, however many of its tenants it is spread over, holds at most its
part of the threads. A thread that comes back goes to the waiting share running the fewest (so one tenant's queue
of slow work does not keep another tenant of the same owner waiting behind it). Work whose caller stopped waiting
still counts against its share until its thread comes back, because that thread is still busy. Used from one event
loop."""

import asyncio
import concurrent.futures
import math
from collections import Counter

from delivery.rules import send_shares


class SharedThreads:
    def __init__(self, threads: int, *, name: str):
        self.size = threads
        self.reserve = math.ceil(threads * send_shares.RESERVE_FRACTION)  # kept for an owner with none running
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self.busy: Counter = Counter()  # threads working for each share
        self.waiting: Counter = Counter()  # callers waiting for a thread, by share
        self.served: dict = {}  # share -> when it last started work (a count), for turns among equals
        self.starts = 0
        self.freed: asyncio.Event | None = None  # set whenever a thread comes back (on the loop)

    async def wait_for_room(self, share, done=None) -> None:
        """Until `share` may start work on a thread, or `done()` says the caller needs none any more (a caller's
        deadline bounds the wait)."""
        if self.freed is None:
            self.freed = asyncio.Event()
        if self.room_for(share) and not self._behind(share):
            return
        self.waiting[share] += 1
        try:
            while not (done and done()) and not (self.room_for(share) and not self._behind(share)):
                self.freed.clear()
                await self.freed.wait()
        finally:
            self.waiting[share] -= 1
            if self.waiting[share] <= 0:
                del self.waiting[share]
            if self.freed is not None:
                self.freed.set()  # whoever is next in line looks again

    def wake(self) -> None:
        """Those waiting look again (something they wait on changed: a lookup they could join started)."""
        if self.freed is not None:
            self.freed.set()

    def _turn(self, share) -> tuple[int, int]:
        return self.busy.get(share, 0), self.served.get(share, -1)

    def _behind(self, share) -> bool:
        """Whether another waiting share should have the next thread before `share`: one running fewer, or as many
        and served less recently."""
        mine = self._turn(share)
        return any(self._turn(other) < mine and self.room_for(other) for other in self.waiting if other != share)

    def run(self, share, function, *args) -> asyncio.Future:
        """`function(*args)` on a thread, counted against `share` until it comes back (call once there is room)."""
        self.busy[share] += 1
        self.starts += 1
        self.served[share] = self.starts
        if len(self.served) > 4096:  # long gone shares are forgotten (a forgotten one is simply served first)
            self.served = dict(sorted(self.served.items(), key=lambda item: item[1])[-1024:])
        future = asyncio.get_running_loop().run_in_executor(self.pool, function, *args)
        future.add_done_callback(lambda _: self._came_back(share))
        return future

    async def start(self, share, function, *args) -> asyncio.Future:
        await self.wait_for_room(share)
        return self.run(share, function, *args)

    def room_for(self, share) -> bool:
        if not send_shares.rooms([*self.busy, share], self.busy, self.size).get(share):  # (busy: >0 only)
            return False
        owners_running = sum(n for key, n in self.busy.items() if key[0] == share[0])
        return not owners_running or self.size - sum(self.busy.values()) > self.reserve

    def _came_back(self, share) -> None:
        self.busy[share] -= 1
        if self.busy[share] <= 0:
            del self.busy[share]
        if self.freed is not None:
            self.freed.set()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

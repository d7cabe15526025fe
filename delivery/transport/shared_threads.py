"""A pool of threads divided in shares (the name lookups' and the transformations'): a share starts work on a thread
only within its room (`rules/send_shares.rooms`: max-min fair across owners, then across each owner's shares, every
share with work running counted as wanting more), and an owner that already has work running leaves the reserve to
an owner that has none, so one owner's slow work, however many of its tenants it is spread over, holds at most its
part of the threads. Work whose caller stopped waiting still counts against its share until its thread comes back,
because that thread is still busy. Used from one event loop."""

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
        self.freed: asyncio.Event | None = None  # set whenever a thread comes back (on the loop)

    async def wait_for_room(self, share) -> None:
        """Until `share` may start work on a thread (a caller's deadline bounds the wait)."""
        if self.freed is None:
            self.freed = asyncio.Event()
        while not self.room_for(share):
            self.freed.clear()
            await self.freed.wait()

    def run(self, share, function, *args) -> asyncio.Future:
        """`function(*args)` on a thread, counted against `share` until it comes back (call once there is room)."""
        self.busy[share] += 1
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

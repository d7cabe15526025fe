"""Threads in shares: a thread that comes back goes to the waiting share running the fewest, so one tenant's queue
of slow work does not hold another tenant of the same owner behind it."""

import asyncio
import time

from delivery.transport.shared_threads import SharedThreads

SLOW_TENANT, OTHER_TENANT = (1, 10), (1, 20)  # two tenants of one owner


def test_a_freed_thread_goes_to_the_share_running_the_fewest():
    threads = SharedThreads(2, name="test-shares")  # one owner alone gets one (the other is the reserve)
    finished: list[str] = []

    async def job(name, share):
        done = await threads.start(share, time.sleep, 0.15)
        await done
        finished.append(name)

    async def scenario():
        queued = [asyncio.create_task(job(f"slow{n}", SLOW_TENANT)) for n in range(5)]
        await asyncio.sleep(0.05)  # the slow tenant's queue is waiting behind its first job
        await asyncio.gather(job("other", OTHER_TENANT), *queued)

    try:
        asyncio.run(scenario())
    finally:
        threads.close()
    assert finished.index("other") <= 1  # next after the job that was running, not after the whole queue

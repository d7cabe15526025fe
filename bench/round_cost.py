"""What one round of a steady stream costs a worker, by phase, measured in one process: a message is published
(not counted), then claimed and started (`pump.claim_and_start`), its answer awaited, and recorded
(`attempts.record_sends`), one message a round, as a pump does when publishes arrive one at a time. CPU is this
process's (every thread: the transport's event loop sends the request while the pump waits), and the statements
each phase runs are counted, with the CPU spent inside them (Django's execute wrappers, psycopg, parameters and
rows) apart from the rest (building requests, decisions, counters). What the other threads do while the next
message is published (the journal forgetting the answers, the counters' flush) is counted apart; the publish
itself is not.

    python bench/round_cost.py [--rounds 1000] [--batch 1]

`--batch N` publishes N messages a round, so the same figures show what a round costs per delivery as it carries
more (the steady stream's pumps carry 3 or so at 100 msgs/s with the 30 ms gathering; a drain carries hundreds).
PostgreSQL's own CPU is not counted here: `rows_per_delivery.py --rate 100` and `scenarios.py --only steady` have it.
"""

import argparse
import collections
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scenarios import Bench  # noqa: E402

PHASES = ("claim and start", "send and wait", "record", "other threads")


@contextmanager
def statements_counted(connection, tally: collections.Counter):
    """Every statement the connection runs meanwhile, counted, with the CPU spent inside it."""

    def counted(execute, sql, params, many, context):
        began = time.process_time()
        try:
            return execute(sql, params, many, context)
        finally:
            tally["cpu in statements"] += time.process_time() - began
            tally["statements"] += 1

    with connection.execute_wrapper(counted):
        yield


def measure(topic, transport, rounds: int, batch: int) -> dict[str, dict[str, float]]:
    """CPU seconds and statements per phase, summed over `rounds` rounds of `batch` messages."""
    from django.db import connection
    from django.utils import timezone

    from delivery.engine.intake.publishing import message_publish
    from delivery.engine.sending import attempts, pump

    spent = {phase: collections.Counter() for phase in PHASES}
    for _ in range(rounds):
        began_round, publishing = time.process_time(), time.thread_time()
        for n in range(batch):
            message_publish(topic=topic, payload={"n": n})
        published = time.thread_time() - publishing
        counted = sum(spent[phase]["cpu"] for phase in PHASES[:3])
        futures, probes = {}, set()
        with statements_counted(connection, spent["claim and start"]):
            began = time.process_time()
            taken, _ = pump.claim_and_start(futures, probes, 512, 64, transport=transport, now=timezone.now())
            spent["claim and start"]["cpu"] += time.process_time() - began
        if taken != batch:
            raise SystemExit(f"a round claimed {taken} of its {batch} messages")
        while futures:
            began = time.process_time()
            done = attempts.next_group(list(futures), timeout=10)
            spent["send and wait"]["cpu"] += time.process_time() - began
            with statements_counted(connection, spent["record"]):
                began = time.process_time()
                attempts.record_sends(done, futures, probes, timezone.now())
                spent["record"]["cpu"] += time.process_time() - began
        # The rest of the round's CPU but the publish's own: what the other threads did while this one published
        # (the journal forgetting the previous round's answers, the counters' flush).
        phases = sum(spent[phase]["cpu"] for phase in PHASES[:3]) - counted
        spent["other threads"]["cpu"] += time.process_time() - began_round - published - phases
    return spent


def report(spent: dict, rounds: int, batch: int) -> None:
    total = sum(tally["cpu"] for tally in spent.values())
    print(f"{rounds} rounds of {batch} message(s): {total / rounds * 1000:.2f} ms of CPU a round, "
          f"{total / rounds / batch * 1000:.2f} ms a delivery")
    for phase in PHASES:
        tally = spent[phase]
        line = f"  {phase:<16} {tally['cpu'] / rounds * 1000:6.2f} ms a round"
        if tally["statements"]:
            line += (f", {tally['statements'] / rounds:.1f} statements taking "
                     f"{tally['cpu in statements'] / rounds * 1000:.2f} ms of it")
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1, help="messages a round (1: the steady stream's worst case)")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="herald-round-")
    os.chmod(workdir, 0o755)
    bench = Bench(workdir)
    try:
        topic_id = bench.reset({"fast": 1})
        os.environ.update(bench.env)
        import django

        django.setup()
        from delivery.engine.plumbing import counters
        from delivery.transport import sender
        from subscriptions.models import Topic

        counters.buffer()  # as a worker does
        topic, transport = Topic.objects.get(id=topic_id), sender.transport()
        measure(topic, transport, 100, args.batch)  # connections, prepared statements, TLS contexts, imports
        report(measure(topic, transport, args.rounds, args.batch), args.rounds, args.batch)
    finally:
        bench.close()


if __name__ == "__main__":
    main()

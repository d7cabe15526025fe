"""What transformations cost (docs/transformations.md), from the outside, with the Procfile's processes:

- the drain of one fast endpoint by 2 workers, plain, with a small (Slack-shaped) transformation, and with each
  event brought down two versions (docs/versions.md), in the same run: deliveries/s and the CPU per 1,000
  deliveries of each process kind;
- the worst handler the limits allow (`while (true) {}`: every call runs to HERALD_TRANSFORM_TIMEOUT_MS) on another
  owner's 20 subscriptions, a flood of them being transformed, beside a quiet owner publishing 5 msgs/s to a server
  of its own: the quiet owner's publish → receipt p99 beside it, against its p99 alone (2× alone + 50 ms).

    python bench/transformations.py [--quick] [--json FILE]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenarios import Bench, cpu_line, measured_drain, per_thousand, reporter  # noqa: E402 (a script beside it)

SLACK = ("function handler(webhook) { webhook.payload = {text: 'New order ' + JSON.stringify(webhook.payload)}; "
         "return webhook; }")
WORST = "function handler(webhook) { while (true) {} }"
TO_V2 = "function handler(webhook) { webhook.payload = {...webhook.payload, v: 2}; return webhook; }"
TO_V1 = "function handler(webhook) { const {n, ...rest} = webhook.payload; webhook.payload = {...rest, number: n}; " \
        "return webhook; }"


def transformed(bench: Bench, code: str, owner: str = "bench") -> None:
    """Every subscription of `owner` gets `code` as its transformation."""
    bench.django(f"""
from subscriptions.models import Subscription
mine = Subscription.objects.filter(topic__owner__username={owner!r})
mine.update(transformation={{"code": {code!r}, "enabled": True}})""")


def versioned(bench: Bench) -> None:
    """customer.created with three versions; the bench's subscriptions pinned to the first, its messages (published
    as the default type) relabelled as the third: each delivery runs two down-converters."""
    bench.django(f"""
from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.models import Message
from subscriptions.models import EventType, Subscription
from django.contrib.auth import get_user_model
user = get_user_model().objects.get(username="bench")
EventType.objects.filter(owner=user).delete()
customer = event_type_create(owner=user, name="customer.created")
event_version_create(event_type=customer, name="2026-01-01")
event_version_create(event_type=customer, name="2026-06-01", down_converter={TO_V1!r})
event_version_create(event_type=customer, name="2026-11-01", down_converter={TO_V2!r})
Subscription.objects.filter(topic__owner=user).update(event_version="2026-01-01")
Message.objects.update(event_type="customer.created", event_version="2026-11-01")""")


def drain_with(bench: Bench, row, messages: int, name: str, prepare) -> None:
    """A drain of `messages` deliveries to one fast endpoint, `prepare(bench)` run after they are published."""
    topic = bench.reset({"fast": 1})
    bench.publish_many(topic, messages, batch=100)
    prepare(bench)
    bench.start_engine(2)
    cpu: dict[str, float] = {}
    seconds = bench.wait_delivered(messages, cpu=cpu)
    bench.stop_engine()
    row(f"drain {messages} deliveries, {name}", messages / seconds, "deliveries/s", **per_thousand(cpu, messages))
    print(cpu_line(cpu, messages, "deliveries"))


def drains(bench: Bench, row, messages: int) -> None:
    """The plain drain, then the same with a small transformation, then with a two-step version chain (same run)."""
    measured_drain(bench, row, messages, f"drain {messages} deliveries, plain")
    drain_with(bench, row, messages, "small transformation", lambda bench: transformed(bench, SLACK))
    drain_with(bench, row, messages, "two down-converters", versioned)


def worst_beside_quiet(bench: Bench, row, messages: int) -> None:
    port, log = bench.own_receiver()
    bench.reset({"flood": 20})
    quiet, token = bench.other_owner("quiet", "quiet", port)
    bench.start_engine()
    bench.warm_up(quiet, token, log)
    alone = bench.steady(quiet, 5, 20, token=token, prefix="quiet", log=log)
    bench.stop_engine()
    topic = bench.reset({"flood": 20})
    transformed(bench, WORST)
    bench.publish_many(topic, messages, batch=100)
    quiet, token = bench.other_owner("quiet2", "quiet", port)
    bench.start_engine()
    bench.warm_up(quiet, token, log)
    beside = bench.steady(quiet, 5, 20, token=token, prefix="quiet", log=log)
    ended = bench.count("SELECT count(*) FROM herald_delivery_delivery WHERE dead_letter_reason = "
                        "'transformation_failed'")
    bench.stop_engine()
    row("quiet owner publish→receipt p99, alone", alone["receipt_p99_ms"], "ms", p50_ms=alone["receipt_p50_ms"])
    row(f"quiet owner p99 beside {messages * 20:,} deliveries whose handler runs to its limit",
        beside["receipt_p99_ms"], "ms", 2 * alone["receipt_p99_ms"] + 50, "2× alone + 50 ms",
        p50_ms=beside["receipt_p50_ms"])
    print(f"{'':<52}{ended:,} of the flood's deliveries ended as transformation_failed meanwhile")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="herald-bench-")
    os.chmod(workdir, 0o755)
    bench = Bench(workdir)
    rows: list[dict] = []
    row = reporter(rows)
    started = time.time()
    try:
        drains(bench, row, 1500 if args.quick else 5000)
        worst_beside_quiet(bench, row, 100 if args.quick else 300)
    finally:
        bench.close()
    print(f"{time.time() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a PostgreSQL failover costs Herald: the primary crashes mid-run and its streaming replica is promoted, with
synchronous and with asynchronous replication (tests/failover.py runs each). For each run: messages acknowledged,
received, lost; acknowledged messages missing on the new primary (asynchronous replication's window); how much WAL
the replica had not yet flushed while the publisher ran (sampled every 20 ms); how long publishing was refused.

    make bench-failover            # 3 runs of each, 1,000 messages at 200/s, the crash after 400
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import failover  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--fail-after", type=int, default=400)
    parser.add_argument("--json", help="write every run's figures here")
    args = parser.parse_args(argv)
    runs = []
    print("| replication | acknowledged | received | missing on the new primary | replica flush lag (bytes: "
          "median / p99 / max) | publishing refused for |")
    print("|---|---|---|---|---|---|")
    for synchronous in (True, False):
        for _ in range(args.runs):
            result = failover.run(synchronous, args.messages, args.rate, args.fail_after, timeout=300)
            runs.append(result)
            lag = result["replica_flush_lag_bytes"]
            print(f"| {result['replication']} | {result['acknowledged']} | {result['received']} | "
                  f"{len(result['acknowledged_but_not_on_the_new_primary'])} | {lag['median']} / {lag['p99']} / "
                  f"{lag['max']} | {result['publishing_stopped_seconds']} s |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The chaos run at a smaller size (`make chaos` runs 10,000 messages), with every Herald process reaching PostgreSQL
through PgBouncer in transaction pooling mode: 1,200 messages published through the REST API to 24 subscriptions
while workers are killed, Redis and then PostgreSQL are down for 6 s while workers and the
scheduler are restarted into the outage, Redis is flushed and restarted, PostgreSQL is restarted and crashed, and the
receivers misbehave. The harness checks 0 lost, 0 stuck, no process that exited by itself (or failed to exit when
asked), duplicates only after a try whose outcome Herald could not know (under 10 %), attempts matching requests and
per-key order."""

import subprocess
import sys

from tests.conftest import ROOT


def test_at_least_once_under_faults(tmp_path):
    figures = tmp_path / "chaos.json"
    run = subprocess.run([sys.executable, "-m", "tests.chaos.harness", "--messages", "1200", "--rate", "48",
                          "--pgbouncer", "--kill-every", "6", "--settle-timeout", "400", "--json", str(figures)],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    summary = run.stdout[run.stdout.find("faults:"):]
    assert run.returncode == 0, summary + run.stderr[-3000:]
    assert "FAIL" not in summary and "lost (accepted" in summary

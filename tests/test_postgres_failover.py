"""PostgreSQL failover: a primary with a synchronous streaming replica, every Herald process on a multi-host
DATABASE_URL (`target_session_attrs=read-write`). The primary crashes mid-run and the replica is promoted; nothing is
restarted, every process finds the new primary by itself, and every message the database acknowledged is
delivered (tests/failover.py; `python -m tests.failover --asynchronous` measures what asynchronous replication can
lose, docs/deployment.md)."""

import json
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from delivery.db_config import database_from_url
from tests.conftest import ROOT


def test_a_multi_host_database_url():
    config = database_from_url("postgres://herald:pw@db1:5432,db2,[fd00::3]:6432/herald"
                               "?target_session_attrs=read-write")
    assert (config["HOST"], config["PORT"]) == ("db1,db2,fd00::3", "5432,5432,6432")
    assert (config["USER"], config["PASSWORD"], config["NAME"]) == ("herald", "pw", "herald")
    assert config["OPTIONS"] == {"target_session_attrs": "read-write", "connect_timeout": 5}  # (+ keepalives: settings)
    single = database_from_url("postgres://herald@db1:5433/herald")
    assert (single["HOST"], single["PORT"], single.get("OPTIONS", {})) == ("db1", 5433, {})
    for wrong in ("postgres://h@db1,/herald", "postgres://h@db1,db2:port/herald"):
        with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
            database_from_url(wrong)


def test_a_failover_to_a_synchronous_replica_loses_nothing_acknowledged():
    run = subprocess.run([sys.executable, "-m", "tests.failover", "--synchronous", "--messages", "150", "--rate",
                          "40", "--fail-after", "50", "--timeout", "200"],
                         cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(run.stdout[run.stdout.index("{"):])
    assert result["acknowledged"] == 150 and result["received"] == 150, result
    assert result["lost"] == [] and result["acknowledged_but_not_on_the_new_primary"] == [], result
    assert result["unfinished"] == 0 and result["exited_by_themselves"] == [], result

"""Herald through PgBouncer (Debian's package) in transaction pooling mode: real workers and the scheduler connect
only through it (`DATABASE_POOLER=pgbouncer`), publishing with ordering keys takes its advisory locks through it,
and PgBouncer restarted mid-run cuts every connection; every message is delivered, none stuck, none lost."""

import os
import subprocess
import sys
import time

import psycopg
import pytest
from django.db import connection

from delivery.db_config import PLANNED_ONCE, PREPARE_AFTER_USES, database
from delivery.models import Delivery
from tests.conftest import ROOT, publish, subprocess_env, subscribe, wait_until
from tests.pgbouncer import PGBOUNCER, PgBouncer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pgbouncer():
    if not os.path.exists(PGBOUNCER):
        pytest.fail("pgbouncer is missing: `make test` installs Debian's pgbouncer package (apt-get install "
                    "pgbouncer)")
    db = connection.settings_dict
    bouncer = PgBouncer(db["HOST"], db["PORT"], db["USER"], db["NAME"]).start()
    yield bouncer
    bouncer.stop()


ORDERED_PUBLISH = """
from subscriptions.models import Topic
from delivery.engine.intake.publishing import Entry, message_publish_batch
topic = Topic.objects.get(id={topic})
for start in range(0, {count}, 20):
    message_publish_batch(topic=topic, entries=[Entry(payload=n, ordering_key="k" + str(n % 3))
                                                for n in range(start, start + 20)])
"""


def test_workers_and_publishers_through_pgbouncer_in_transaction_mode(pgbouncer, api, receiver, processes):
    env = {"DATABASE_URL": pgbouncer.url, "DATABASE_POOLER": "pgbouncer"}
    topic, subscription = subscribe(api, receiver, ordered_delivery=True)
    for _ in range(2):
        processes.worker(**env)
    processes.cron(**env)
    for n in range(30):
        publish(api, topic, 1000 + n)  # (from the test, directly; no ordering key)
    # Ordered publishing (advisory transaction locks) from another process, through PgBouncer.
    published = subprocess.run([sys.executable, "manage.py", "shell", "-c",
                                ORDERED_PUBLISH.format(topic=topic["id"], count=120)],
                               env=subprocess_env(**env), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert published.returncode == 0, published.stderr[-3000:]
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() >= 60, timeout=60)

    pgbouncer.stop()  # every connection cut, mid-run
    time.sleep(2)
    pgbouncer.start()
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 150, timeout=120)
    assert not Delivery.objects.exclude(status="succeeded").exists()
    with open(os.path.join(pgbouncer.dir, "pgbouncer.log")) as log:
        logins = log.read().count("login attempt")
    assert logins >= 6, logins  # the workers, the scheduler and the publisher came through PgBouncer, twice over
    payloads = [r.json()["data"] for r in receiver.requests]
    assert set(payloads) == set(range(120)) | set(range(1000, 1030))  # every message arrived (at least once)
    for key in range(3):  # each ordering key's messages in publish order (first arrivals)
        keyed = [n for n in payloads if n < 1000 and n % 3 == key]
        firsts = list(dict.fromkeys(keyed))
        assert firsts == sorted(firsts), (key, firsts)


def test_what_database_pooler_turns_off_is_what_transaction_pooling_breaks():
    """Two sessions share one server connection, as PgBouncer's transaction mode lets them: psycopg's prepared
    statements (its default: prepared on the fifth use) collide there; with DATABASE_POOLER=pgbouncer's setting
    (`prepare_threshold` None) they are never prepared and nothing collides."""
    db = connection.settings_dict
    bouncer = PgBouncer(db["HOST"], db["PORT"], db["USER"], db["NAME"], pool_size=1).start()
    try:
        def sessions(prepare_threshold):
            return [psycopg.connect(bouncer.url.replace("postgres://", "postgresql://"), autocommit=True,
                                    prepare_threshold=prepare_threshold) for _ in range(2)]

        first, second = sessions(5)  # psycopg's default
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            for _ in range(6):
                first.execute("SELECT 1").fetchone()
                second.execute("SELECT 1").fetchone()
        first.close()
        second.close()

        env = subprocess_env(DATABASE_URL=bouncer.url, DATABASE_POOLER="pgbouncer")
        shown = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import "
                                "settings as s; d = s.DATABASES['default']; print(d['OPTIONS']['prepare_threshold'], "
                                "d['DISABLE_SERVER_SIDE_CURSORS'])"],
                               env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert shown.stdout.split() == ["None", "True"], shown.stderr[-2000:]
        first, second = sessions(None)  # what DATABASE_POOLER=pgbouncer sets
        for _ in range(20):
            assert first.execute("SELECT 1").fetchone() == (1,)
            assert second.execute("SELECT 1").fetchone() == (1,)
        first.close()
        second.close()
    finally:
        bouncer.stop()


def test_without_a_pooler_herald_s_statements_are_prepared_and_behind_pgbouncer_nothing_is_set_per_session():
    direct = database("postgres://herald@db1:5432/herald")["OPTIONS"]
    assert direct["prepare_threshold"] == PREPARE_AFTER_USES and PLANNED_ONCE in direct["options"]
    pooled = database("postgres://herald@db1:5432/herald", pooler="pgbouncer")["OPTIONS"]
    assert pooled["prepare_threshold"] is None and "options" not in pooled  # PgBouncer refuses startup options

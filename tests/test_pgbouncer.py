"""Herald through PgBouncer (Debian's package) in transaction pooling mode: real workers and the scheduler connect
only through it (`DATABASE_POOLER=pgbouncer`), publishing with ordering keys takes its advisory locks through it,
and PgBouncer restarted mid-run cuts every connection; every message is delivered, none stuck, none lost."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from django.db import connection

from delivery.management import localredis
from delivery.models import Delivery
from tests.conftest import ROOT, publish, subprocess_env, subscribe, wait_until
from tests.stack import as_postgres

pytestmark = pytest.mark.django_db(transaction=True)
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class PgBouncer:
    """A pgbouncer in front of the test database, run as the postgres user (it refuses root)."""

    def __init__(self):
        db = connection.settings_dict
        self.dir = tempfile.mkdtemp(prefix="herald-pgbouncer-")
        os.chmod(self.dir, 0o777)
        self.port = localredis.free_port()
        self.user = db["USER"]
        self.database = db["NAME"]
        with open(os.path.join(self.dir, "users.txt"), "w") as users:
            users.write(f'"{self.user}" ""\n')
        with open(os.path.join(self.dir, "pgbouncer.ini"), "w") as config:
            config.write(f"""[databases]
{self.database} = host={db["HOST"]} port={db["PORT"]} dbname={self.database}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir}/users.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 8
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = {self.dir}/pgbouncer.log
pidfile = {self.dir}/pgbouncer.pid
""")
        for name in os.listdir(self.dir):
            os.chmod(os.path.join(self.dir, name), 0o644)
        self.process = None

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def start(self) -> "PgBouncer":
        self.process = subprocess.Popen(as_postgres([PGBOUNCER, os.path.join(self.dir, "pgbouncer.ini")]),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: _listening(self.port), timeout=20)
        return self

    def stop(self) -> None:
        """Immediate shutdown (SIGINT to pgbouncer itself, not to runuser): every client connection is cut."""
        if self.process and self.process.poll() is None:
            try:
                with open(os.path.join(self.dir, "pgbouncer.pid")) as pidfile:
                    os.kill(int(pidfile.read().strip()), signal.SIGINT)
                self.process.wait(20)
            except (OSError, ValueError, subprocess.TimeoutExpired):  # never leave one running
                subprocess.run(["pkill", "-f", f"pgbouncer {self.dir}/"], check=False)
                self.process.wait(20)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def pgbouncer():
    if not os.path.exists(PGBOUNCER):
        pytest.fail("pgbouncer is missing: `make test` installs Debian's pgbouncer package (apt-get install "
                    "pgbouncer)")
    bouncer = PgBouncer().start()
    yield bouncer
    bouncer.stop()


ORDERED_PUBLISH = """
from subscriptions.models import Topic
from delivery.engine.publishing import Entry, message_publish_batch
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

"""A pgbouncer (Debian's package) in transaction pooling mode in front of a PostgreSQL, for tests and the chaos run.
It runs as the postgres user (it refuses root) and is stopped through its pidfile."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from delivery.management import localredis
from tests.stack import as_postgres

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class PgBouncer:
    """A pgbouncer in front of the test database, run as the postgres user (it refuses root)."""

    def __init__(self, host: str, port: int | str, user: str, database: str, *, pool_size: int = 8):
        self.dir = tempfile.mkdtemp(prefix="herald-pgbouncer-")
        os.chmod(self.dir, 0o777)
        self.port = localredis.free_port()
        self.user = user
        self.database = database
        with open(os.path.join(self.dir, "users.txt"), "w") as users:
            users.write(f'"{self.user}" ""\n')
        with open(os.path.join(self.dir, "pgbouncer.ini"), "w") as config:
            config.write(f"""[databases]
{self.database} = host={host} port={port} dbname={self.database}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir}/users.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = {pool_size}
server_reset_query =
server_login_retry = 1
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
        _wait(lambda: _listening(self.port), 20)
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




def _wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"pgbouncer is not listening after {timeout} s")
        time.sleep(0.05)

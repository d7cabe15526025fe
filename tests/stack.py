"""Run a command against a throwaway PostgreSQL cluster and a throwaway Redis, then stop both.

    python tests/stack.py -- python -m pytest

DATABASE_URL / REDIS_URL, when set, are used instead of starting servers. PostgreSQL's server binaries come from
the system (/usr/lib/postgresql/<version>/bin, or pg_config --bindir); initdb refuses root, so as root the cluster
runs as the `postgres` user.
"""

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from delivery.management import localredis  # noqa: E402

PYTEST_NO_TESTS = 5


def postgres_bindir() -> str:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    if candidates:
        return candidates[-1]
    if shutil.which("pg_config"):
        return subprocess.check_output(["pg_config", "--bindir"], text=True).strip()
    raise SystemExit("PostgreSQL server binaries not found: install postgresql (or set DATABASE_URL)")


def as_postgres(args: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


class Postgres:
    """A throwaway cluster in `workdir`: started, restarted (as maintenance or a failover would) and stopped."""

    def __init__(self, workdir: str, *, durable_commits: bool = False, host: str = "127.0.0.1", port: int = 0,
                 namespace: str = "", trusted_network: str = ""):
        """`durable_commits`: keep PostgreSQL's default `synchronous_commit=on`, so a commit it acknowledged
        survives a crash of the server (the chaos run crashes it); the test suite turns it off for speed.
        `namespace`: a network namespace to run the server in (a stand-in host), listening on `host`, which
        accepts connections from `trusted_network` too."""
        self.durable_commits = durable_commits
        self.bindir = postgres_bindir()
        self.workdir = workdir
        self.data = os.path.join(workdir, "pg")
        self.user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
        self.host, self.port = host, port or localredis.free_port()
        self.namespace, self.trusted_network = namespace, trusted_network
        self.url = f"postgres://{self.user}@{host}:{self.port}/herald"

    def run(self, *args: str, **kwargs) -> None:
        """A PostgreSQL program, as its user, in the server's namespace if it has one."""
        inside = ["ip", "netns", "exec", self.namespace] if self.namespace else []
        subprocess.run([*inside, *as_postgres(list(args))], check=kwargs.pop("check", True), **kwargs)

    def pg_ctl(self, *args: str) -> None:
        self.run(f"{self.bindir}/pg_ctl", "-D", self.data, *args, stdout=subprocess.DEVNULL)

    def start(self) -> "Postgres":
        os.makedirs(self.data, mode=0o700)
        if os.geteuid() == 0:
            shutil.chown(self.workdir, "postgres")
            shutil.chown(self.data, "postgres")
        self.run(f"{self.bindir}/initdb", "-D", self.data, "-U", self.user, "-A", "trust", "--no-sync", "-E",
                 "UTF8", stdout=subprocess.DEVNULL)
        if self.trusted_network:
            with open(os.path.join(self.data, "pg_hba.conf"), "a") as hba:
                hba.write(f"host all all {self.trusted_network} trust\n")
        self.pg_ctl("-o", self.options(), "-l", f"{self.workdir}/pg.log", "-w", "start")
        self.run(f"{self.bindir}/createdb", "-h", self.host, "-p", str(self.port), "-U", self.user, "herald")
        return self

    def options(self) -> str:
        commits = "" if self.durable_commits else "-c synchronous_commit=off "
        return (f"-c listen_addresses={self.host} -p {self.port} -k {self.workdir} -c fsync=off "
                f"{commits}-c full_page_writes=off -c max_connections=200")

    def restart(self, mode: str = "fast") -> None:
        """Every session is cut, as in a restart for maintenance (`fast`) or a crash (`immediate`)."""
        self.pg_ctl("-m", mode, "-o", self.options(), "-l", f"{self.workdir}/pg.log", "-w", "restart")

    def shut_down(self, mode: str = "fast") -> None:
        """Stopped, as for maintenance or an outage (`start_again` brings the same cluster back)."""
        self.pg_ctl("-m", mode, "-w", "stop")

    def start_again(self) -> None:
        self.pg_ctl("-o", self.options(), "-l", f"{self.workdir}/pg.log", "-w", "start")

    def stop(self) -> None:
        self.run(f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "immediate", "stop", check=False,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_postgres(workdir: str):
    cluster = Postgres(workdir).start()
    return cluster.url, cluster.stop


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        raise SystemExit("usage: tests/stack.py -- COMMAND...")
    env = dict(os.environ)
    stops = []
    # SIGTERM (a `timeout`, a CI runner giving up) ends the command and stops what was started here, as Ctrl-C
    # does: by default it would end this process alone and leave its PostgreSQL running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    workdir = tempfile.mkdtemp(prefix="herald-stack-")
    os.chmod(workdir, 0o755)
    try:
        if not env.get("DATABASE_URL"):
            env["DATABASE_URL"], stop = start_postgres(workdir)
            stops.append(stop)
        if not env.get("REDIS_URL"):
            port = localredis.free_port()
            process = localredis.start(port, os.path.join(workdir, "redis"))
            stops.append(lambda: (process.terminate(), process.wait(10)))
            env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        print(f"stack: DATABASE_URL={env['DATABASE_URL']} REDIS_URL={env['REDIS_URL']}", flush=True)
        code = subprocess.call(argv, env=env)
        if code == PYTEST_NO_TESTS:
            print("stack: the test run collected no tests; that is a failure here", file=sys.stderr)
            return 1
        return code
    finally:
        for stop in reversed(stops):
            try:
                stop()
            except Exception as exc:  # keep stopping the rest
                print(f"stack: cleanup problem: {exc}", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

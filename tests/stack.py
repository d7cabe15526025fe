"""Run a command against a throwaway PostgreSQL cluster and a throwaway Redis, then stop both.

    python tests/stack.py -- python -m pytest

DATABASE_URL / REDIS_URL, when set, are used instead of starting servers. PostgreSQL's server binaries come from
the system (/usr/lib/postgresql/<version>/bin, or pg_config --bindir); initdb refuses root, so as root the cluster
runs as the `postgres` user.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from delivery import localredis  # noqa: E402

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


def start_postgres(workdir: str):
    bindir = postgres_bindir()
    data = os.path.join(workdir, "pg")
    os.makedirs(data)
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres")
        shutil.chown(data, "postgres")
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
    subprocess.run(as_postgres([f"{bindir}/initdb", "-D", data, "-U", user, "-A", "trust", "--no-sync",
                                "-E", "UTF8"]), check=True, stdout=subprocess.DEVNULL)
    port = localredis.free_port()
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {workdir} -c fsync=off -c synchronous_commit=off "
               "-c full_page_writes=off -c max_connections=200")
    subprocess.run(as_postgres([f"{bindir}/pg_ctl", "-D", data, "-o", options, "-l", f"{workdir}/pg.log", "-w",
                                "start"]), check=True, stdout=subprocess.DEVNULL)
    subprocess.run(as_postgres([f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", user, "herald"]),
                   check=True)

    def stop():
        subprocess.run(as_postgres([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return f"postgres://{user}@127.0.0.1:{port}/herald", stop


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        raise SystemExit("usage: tests/stack.py -- COMMAND...")
    env = dict(os.environ)
    stops = []
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

"""A process's own heartbeat, for a liveness probe: `manage.py herald_alive --worker` (or `--scheduler`).

Each worker and scheduler process touches a file of its own, `<HERALD_HEARTBEAT_DIR>/<kind>-<pid>.beat` (default
the system's temporary directory), every BEAT_SECONDS: the scheduler from its loop (also while it waits for
PostgreSQL or Redis), a worker from a thread of its own, which stops beating while one job has run longer than
HERALD_JOB_TIMEOUT_SECONDS plus a minute (a wedged worker). Neither asks Redis or PostgreSQL: a process waiting for
them is alive and waiting, and restarting it would not bring them back (`/readyz` says whether they answer).

`alive(kind, within)` is true when every process of that kind whose file is here is still running and beat within
`within` seconds, and there is at least one; files of processes that are gone are removed.
"""

import os
import tempfile
import threading
import time
from pathlib import Path

from delivery.conf import herald

BEAT_SECONDS = 5.0
WORKER, SCHEDULER = "worker", "scheduler"


def directory() -> Path:
    return Path(herald.HEARTBEAT_DIR or Path(tempfile.gettempdir()) / "herald-heartbeats")


def beat(kind: str) -> None:
    """Touch this process's file (never raises: a probe that cannot be written is the probe's failure)."""
    try:
        path = directory() / f"{kind}-{os.getpid()}.beat"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()  # (its time now, whether it was there or not)
    except OSError:
        pass


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def alive(kind: str, within: float, now: float | None = None) -> tuple[bool, str]:
    """(alive, why) for the processes of `kind` on this host."""
    now = time.time() if now is None else now
    found = []
    for path in directory().glob(f"{kind}-*.beat"):
        try:
            pid, age = int(path.stem.split("-")[-1]), now - path.stat().st_mtime
        except (ValueError, OSError):
            continue
        if not _running(pid):
            path.unlink(missing_ok=True)
            continue
        found.append((pid, age))
    if not found:
        return False, f"no {kind} process has beaten in {directory()}"
    stale = [f"{pid} ({age:.0f} s ago)" for pid, age in found if age > within]
    if stale:
        return False, f"{kind} {', '.join(stale)} beat longer than {within:g} s ago"
    return True, f"{len(found)} {kind} process(es) beat within {within:g} s"


class WorkerBeat:
    """A worker's heartbeat thread; the worker sets `job_since` while a job runs, so that it sees one that never
    ends."""

    def __init__(self):
        self.job_since: float | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="herald-heartbeat", daemon=True)

    def start(self) -> "WorkerBeat":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        while not self.stopped.is_set():
            since = self.job_since
            if since is None or time.monotonic() - since < float(herald.JOB_TIMEOUT_SECONDS) + 60:
                beat(WORKER)
            self.stopped.wait(BEAT_SECONDS)

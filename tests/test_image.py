"""The image (Containerfile): built with podman from a Debian base made by mmdebstrap (no registry image can be
pulled here) and wheels fetched outside the build; migrate, web and a worker run from it against this test's
PostgreSQL and Redis, and an event published through the containerised API arrives at a receiver on this host.
The image runs as a non-root user and holds no compiler. Skipped, saying why, where podman cannot run."""

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
import requests
from django.db import connection
from rest_framework.authtoken.models import Token

from delivery import VERSION
from delivery.management import localredis
from tests import fence
from tests.conftest import ROOT, wait_until

PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
BASE = "localhost/herald-base:bookworm"
MIRROR = "deb http://deb.debian.org/debian bookworm main"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")  # the host's trust, which reaching the index may need


def podman(*args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert run.returncode == 0, f"podman {' '.join(args[:3])}: {run.stdout[-2000:]}{run.stderr[-3000:]}"
    return run


def why_not() -> str | None:
    if shutil.which("podman") is None or shutil.which("runc") is None:
        return "podman or runc is not installed (make test installs them as root: apt-get install podman runc)"
    if os.geteuid() != 0:
        return "podman runs here as root only (--runtime runc --cgroup-manager=cgroupfs)"
    if podman("info", timeout=120, check=False).returncode != 0:
        return "podman info failed on this machine"
    if podman("image", "exists", BASE, check=False).returncode != 0 and shutil.which("mmdebstrap") is None:
        return "no Debian base image and no mmdebstrap to make one (apt-get install mmdebstrap)"
    return None


pytestmark = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The image, built from a copy of this checkout's files (the build context a release uses)."""
    work = tmp_path_factory.mktemp("image")
    if podman("image", "exists", BASE, check=False).returncode != 0:
        tar = work / "base.tar"
        made = subprocess.run(["mmdebstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
                               "bookworm", str(tar), MIRROR], capture_output=True, text=True, timeout=900)
        assert made.returncode == 0, made.stderr[-3000:]
        podman("import", str(tar), BASE)
    context = work / "context"
    context.mkdir()
    for name in ("Containerfile", "manage.py", "requirements.txt"):
        shutil.copy(ROOT / name, context / name)
    for name in ("project", "subscriptions", "delivery", "templates", "deploy"):
        shutil.copytree(ROOT / name, context / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = context / "wheels"
    wheels.mkdir()
    # the wheels, fetched outside the build by the base's own Python (its version decides some dependencies)
    trust = ["-v", f"{HOST_CA}:/host-ca.crt:ro", "-e", "PIP_CERT=/host-ca.crt"] if HOST_CA.exists() else []
    podman("run", "--rm", "--network", "host", *LIMITS, *trust, "-v", f"{context / 'requirements.txt'}:/r.txt:ro",
           "-v", f"{wheels}:/wheels", BASE, "sh", "-c",
           "python3 -m venv /tmp/v && /tmp/v/bin/pip download -q --disable-pip-version-check --only-binary=:all: "
           "-r /r.txt -d /wheels")
    tag = f"localhost/herald:test-{uuid.uuid4().hex[:8]}"
    podman("build", "--network", "host", *LIMITS, "--build-arg", f"BASE={BASE}", "--build-arg", "WHEELS=wheels",
           "-t", tag, "-f", "Containerfile", str(context))
    yield tag
    podman("rmi", "-f", tag, check=False)


@pytest.fixture
def containers():
    started: list[str] = []
    yield started
    for name in started:
        podman("rm", "-f", "-t", "5", name, check=False)


def environment(port: int) -> list[str]:
    db = connection.settings_dict
    values = {"DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
              "REDIS_URL": os.environ["REDIS_URL"], "SECRET_KEY": "image-test", "ALLOWED_HOSTS": "127.0.0.1",
              "HERALD_ALLOWED_NETWORKS": "127.0.0.0/8", "HERALD_REQUIRE_CONFIRMATION": "false",
              "HERALD_PUBLIC_URL": f"http://127.0.0.1:{port}", "HERALD_HEARTBEAT_DIR": tempfile.gettempdir()}
    return [item for key, value in values.items() for item in ("-e", f"{key}={value}")]


@pytest.mark.django_db(transaction=True)
def test_migrate_web_and_a_worker_from_the_image_deliver_an_event(image, containers, receiver, user, redis_conn):
    port = localredis.free_port()
    fence.allow("127.0.0.1", port)
    env = environment(port)
    facts = podman("run", "--rm", "--network", "host", *LIMITS, *env, image, "sh", "-c",
                   "id -u; command -v gcc cc c++ || echo no-compiler; python manage.py herald_version").stdout
    uid, compilers, version = facts.split()[:3]
    assert uid != "0" and compilers == "no-compiler" and version == VERSION
    podman("run", "--rm", "--network", "host", *LIMITS, *env, image, "python", "manage.py", "migrate", "--noinput")
    for name, command in (("web", ["gunicorn", "project.wsgi", "-c", "python:project.gunicorn", "--bind",
                                   f"127.0.0.1:{port}", "--workers", "1"]),
                          ("worker", ["python", "manage.py", "rqworker", "deliveries", "retries"])):
        container = f"herald-test-{name}-{uuid.uuid4().hex[:8]}"
        podman("run", "-d", "--name", container, "--network", "host", *LIMITS, *env, image, *command)
        containers.append(container)
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _ready(base), timeout=120, interval=0.5)
    api = requests.Session()
    api.headers["Authorization"] = f"Token {Token.objects.get_or_create(user=user)[0].key}"
    topic = api.post(f"{base}/api/topics/", json={"name": "from-the-image"}, timeout=30).json()
    subscribed = api.post(f"{base}/api/subscriptions/", json={"topic": topic["id"], "endpoint": receiver.url},
                          timeout=30)
    assert subscribed.status_code == 201, subscribed.text
    published = api.post(f"{base}/api/topics/{topic['id']}/publish/", json={"payload": {"n": 1}}, timeout=30)
    assert published.status_code == 202, published.text

    (request,) = receiver.wait_for(1, timeout=120)

    assert request.json()["data"] == {"n": 1} and request.headers["user-agent"] == f"Herald/{VERSION}"
    assert api.get(f"{base}/api/", timeout=30).json()["version"] == VERSION


def _ready(base: str) -> bool:
    try:
        return requests.get(f"{base}/readyz", timeout=5).status_code == 200
    except requests.RequestException:
        return False

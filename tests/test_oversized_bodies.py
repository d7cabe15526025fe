"""A body over the limit gets a JSON 413 the client can read: the server reads and discards the rest of the body
(up to a bound) before it answers, instead of closing the connection while the client is still sending. Tried
through gunicorn, as Herald runs (Django's test server reads differently)."""

import json
import socket
import subprocess
import sys

import pytest
import requests
from rest_framework.authtoken.models import Token

from delivery.management import localredis
from tests.conftest import ROOT, client_for, subprocess_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gunicorn(redis_conn):
    port = localredis.free_port()
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "project.wsgi", "-c", "python:project.gunicorn",
                               "--bind", f"127.0.0.1:{port}", "--workers", "1"], cwd=ROOT, env=subprocess_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: _answers(port), timeout=30, interval=0.2)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(20)


def _answers(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/api/", timeout=10).status_code == 401
    except requests.RequestException:
        return False


def test_an_oversized_publish_gets_a_readable_json_413(gunicorn, user):
    assert client_for(user).post("/api/topics/", {"name": "big"}, format="json").status_code == 201
    headers = {"Authorization": f"Token {Token.objects.get(user=user).key}", "Content-Type": "application/json"}
    session = requests.Session()
    for size in (3_000_000, 20_000_000):
        body = json.dumps({"payload": "x" * size}).encode()
        answer = session.post(f"{gunicorn}/api/topics/big/publish/", data=body, headers=headers, timeout=60)
        assert answer.status_code == 413, (size, answer.text[:300])
        assert "larger than" in answer.json()["detail"]


def test_past_the_drain_bound_the_413_comes_without_waiting_for_the_body(gunicorn):
    host, port = gunicorn.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /api/topics/big/publish/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000000\r\n\r\n{\"payload\": \"")  # and never the rest
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413") and b"larger than" in answer

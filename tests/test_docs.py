"""The docs are tests: every code block of README.md and docs/*.md says, in an HTML comment just before it, whether it
runs and how, and the blocks that run are run here, as pasted, against the suite's PostgreSQL and Redis:

    <!-- docs-test: run -->                                    Python: executed in a fresh namespace
    <!-- docs-test: run with NAME, NAME (why) -->              ... where NAME is yours (the test provides a stand-in)
    <!-- docs-test: run as a delivery policy -->              JSON: a policy Herald accepts
    <!-- docs-test: run as a topic delivery policy -->        JSON: a topic's policy Herald accepts (SNS's form too)
    <!-- docs-test: run as a verifier (verify) -->             Python: its function checks a real signed request
    <!-- docs-test: run as a pytest test (test_x) with ... --> Python: its test function is called with its fixtures
    <!-- docs-test: run by tests/test_x.py (how) -->           run by that test module (which must exist)
    <!-- docs-test: skip (why) -->                             cannot run here, and why

A Python block must define or import every name it uses (checked with ruff's undefined-name rule), except the
names its marker gives. The count of run, run-elsewhere and skipped blocks is printed at the end of the session
(tests/conftest.py). README's API table is checked against the OpenAPI schema both ways."""

import base64
import json
import logging.config
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import HTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db.models.signals import post_delete, post_save
from django.test import RequestFactory
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.settings import patched_settings

from delivery import signals
from delivery.engine.accounts import confirmation
from delivery.events import publish
from delivery.rules import policy, policy_levels, signing
from delivery.rules.filters import policy as filter_policy
from delivery.testing import capture_events
from delivery.web.api.docs import SCHEMA
from subscriptions.models import Endpoint, Subscription, Topic
from tests.conftest import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- docs-test: (?P<what>run|skip)(?P<rest>.*?)-->\s*$")
FENCE = re.compile(r"^```(\w+)\s*$")
SUMMARY: dict[str, int] = {"run": 0, "run elsewhere": 0, "skipped": 0}  # printed by tests/conftest.py


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    language: str
    text: str
    marker: str  # the comment's text after "docs-test:", "" when there is none

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}"

    @property
    def kind(self) -> str:
        """"" for a plain run, else what follows "run as a" (a delivery policy, a verifier, ...)."""
        found = re.match(r"run as an? ([a-z0-9 -]+?)(?: \(| with |$)", self.marker.strip())
        return found.group(1).strip() if found else ""

    @property
    def function(self) -> str | None:
        found = re.match(r"run as an? [a-z0-9 -]+ \((\w+)\)", self.marker.strip())
        return found.group(1) if found else None

    @property
    def given(self) -> list[str]:
        """The names the marker says are the reader's own (the test gives stand-ins)."""
        found = re.search(r" with ([A-Za-z_][\w, ]*?)(?: \(|$)", self.marker.strip())
        return [name.strip() for name in found.group(1).split(",")] if found else []


def blocks() -> list[Block]:
    found = []
    for path in DOCUMENTS:
        lines = path.read_text().splitlines()
        number = 0
        while number < len(lines):
            fence = FENCE.match(lines[number])
            if not fence:
                number += 1
                continue
            end = next(i for i in range(number + 1, len(lines)) if lines[i].startswith("```"))
            previous = next((lines[i] for i in range(number - 1, -1, -1) if lines[i].strip()), "")
            marker = MARKER.match(previous)
            found.append(Block(str(path.relative_to(ROOT)), number + 1, fence.group(1),
                               "\n".join(lines[number + 1:end]) + "\n",
                               f"{marker.group('what')}{marker.group('rest')}".strip() if marker else ""))
            number = end + 1
    return found


BLOCKS = blocks()
RUN = [block for block in BLOCKS if block.marker.startswith("run") and not block.marker.startswith("run by")]


def test_every_block_says_whether_it_runs():
    unmarked = [block.id for block in BLOCKS if not block.marker]
    assert unmarked == [], "add <!-- docs-test: run --> or <!-- docs-test: skip (why) --> before each"
    skipped_without_reason = [b.id for b in BLOCKS if b.marker.startswith("skip") and "(" not in b.marker]
    assert skipped_without_reason == []
    elsewhere = [block for block in BLOCKS if block.marker.startswith("run by")]
    for block in elsewhere:
        module = block.marker.split()[2]
        assert (ROOT / module).exists(), f"{block.id}: {module} does not exist"
    SUMMARY.update({"run": len(RUN), "run elsewhere": len(elsewhere),
                    "skipped": sum(b.marker.startswith("skip") for b in BLOCKS)})
    assert len(RUN) >= 15  # the guard against a parser that finds nothing


@pytest.mark.parametrize("block", [b for b in RUN if b.language == "python"], ids=lambda b: b.id)
def test_a_python_block_names_only_what_it_defines_or_imports(block, tmp_path):
    source = tmp_path / "block.py"
    source.write_text("".join(f"{name} = None\n" for name in block.given) + block.text)
    found = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821", "--quiet",
                            str(source)], capture_output=True, text=True)
    assert found.returncode == 0, f"{block.id} uses names it does not define:\n{found.stdout}"


# --- stand-ins for what the reader has and the test does not -------------------------------------------------------

class Order(SimpleNamespace):
    """Your model: `Order.objects.create(total=...)`."""

    created: list = []

    class objects:  # noqa: N801 (a model manager's spelling)
        @staticmethod
        def create(**fields):
            order = Order(id=len(Order.created) + 1, **fields)
            Order.created.append(order)
            return order


class OrderClient:
    """Your test client and your /orders/ view: posting an order publishes order.placed, as your view would."""

    def post(self, path, data):
        order = Order.objects.create(**data)
        publish("orders", {"order": order.id, "total": order.total}, owner="shop", create=True,
                event_type="order.placed")


def signed_request(secret: str, body: bytes = b'{"data": 1}') -> tuple[dict, bytes]:
    stamp = str(int(time.time()))
    return {"webhook-id": "msg_1", "webhook-timestamp": stamp,
            "webhook-signature": signing.sign(secret, "msg_1", int(stamp), body)}, body


# --- running ----------------------------------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("block", RUN, ids=lambda b: b.id)
def test_a_block_runs_as_pasted(block, redis_conn, capsys, django_user_model):
    if block.language == "json":
        document = json.loads(block.text)
        if block.kind == "delivery policy":
            policy.parse(document)  # raises naming every bad field
        if block.kind == "topic delivery policy":  # SNS's topic form too
            assert policy_levels.validated(document, level=policy_levels.TOPIC) is not None
        if block.kind == "filter policy":  # "run as a filter policy (scope)": refused with the part named
            filter_policy.validate(document, re.search(r"\((\w+)\)", block.marker).group(1))
        return
    if block.kind == "confirmation receiver in node":
        if shutil.which("node") is None:
            pytest.skip("no node here (the Python receiver runs the same handshake)")
        script = Path(tempfile.mkdtemp()) / "hooks.js"
        script.write_text(block.text)
        port = free_port()
        server = subprocess.Popen(["node", str(script)], env={**os.environ, "PORT": str(port)})
        try:
            wait_for_port(port)
            assert handshake_with(f"http://127.0.0.1:{port}/hooks", django_user_model) == "confirmed"
        finally:
            server.terminate()
            server.wait(10)
        return
    if block.kind == "confirming handler in node":
        node_handler_answers(block)
        return
    assert block.language == "python", f"{block.id}: nothing runs {block.language} here; mark it skip (why)"
    namespace = {"__name__": f"docs_{Path(block.document).stem}"}
    stand_ins = {"Order": Order, "Customer": Group, "create_invoice": lambda data: None,
                 "SECRET": signing.generate_secret(), "client": OrderClient()}
    key = signing.generate_signing_key()
    stand_ins["PUBLIC_KEY"] = signing.public_key(key)
    for name in block.given:
        namespace[name] = stand_ins[name]
    django_user_model.objects.get_or_create(username="shop")
    receivers = {signal: list(signal.receivers) for signal in (post_save, post_delete, signals.delivery_succeeded,
                                                                 signals.delivery_dead_lettered,
                                                                 signals.endpoint_state_changed)}
    try:
        exec(compile(block.text, block.id, "exec"), namespace)  # noqa: S102 (the documentation's own code)
        check(block, namespace, stand_ins, key)
        if block.kind == "logging config":  # Herald's attempt lines come out, as JSON with their fields
            logging.config.dictConfig(namespace["LOGGING"])
            try:
                capsys.readouterr()
                logging.getLogger("herald.attempt").info("attempt tenant=acme", extra={"herald": {
                    "tenant": "acme", "attempt": 2, "endpoint_host": "hooks.example.com"}})
                line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
                assert (line["logger"], line["tenant"], line["attempt"]) == ("herald.attempt", "acme", 2)
            finally:
                logging.config.dictConfig(settings.LOGGING)
        if block.kind == "confirmation receiver":  # the handler class, served on 127.0.0.1, confirms a handshake
            server = HTTPServer(("127.0.0.1", 0), namespace[block.function])
            threading.Thread(target=server.serve_forever, daemon=True).start()
            try:
                assert handshake_with(f"http://127.0.0.1:{server.server_port}/hooks", django_user_model) == "confirmed"
            finally:
                server.shutdown()
    finally:
        for signal, connected in receivers.items():  # what a block connected stays in the block
            signal.receivers = connected
            signal.sender_receivers_cache.clear()


NODE_LIBRARY = "standardwebhooks@1.1.1"  # the official Standard Webhooks library for JavaScript, from npm
NODE_HARNESS = """
const { handle } = require("./handler");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
let answer;
try { answer = handle(input.secret, input.body, input.headers); } catch (error) { answer = ["refused", String(error)]; }
process.stdout.write(JSON.stringify(answer));
"""


def node_handler_answers(block: Block) -> None:
    """A Node handler from the docs, with the official npm library, verifies a request Herald signed and answers
    its confirmation (skipped where node or npm, or the npm registry, is not there)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("no node or npm here (the Python handler beside it runs)")
    folder = Path(tempfile.mkdtemp())
    installed = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", NODE_LIBRARY], cwd=folder,
                               capture_output=True, text=True, timeout=300)
    if installed.returncode != 0:
        pytest.skip(f"npm could not install {NODE_LIBRARY}: {installed.stderr[-300:]}")
    (folder / "handler.js").write_text(block.text)
    (folder / "harness.js").write_text(NODE_HARNESS)
    secret = signing.generate_secret()

    def answer(body: bytes, headers: dict) -> list:
        run = subprocess.run(["node", "harness.js"], cwd=folder, capture_output=True, text=True, timeout=60,
                             input=json.dumps({"secret": secret, "body": body.decode(), "headers": headers}))
        assert run.returncode == 0, run.stderr[-2000:]
        return json.loads(run.stdout)

    confirmation = json.dumps({"type": "herald.subscription.confirmation", "data": {"token": "tok-1"}}).encode()
    headers, body = signed_request(secret, confirmation)
    status, text = answer(body, headers)
    assert status == 200 and json.loads(text) == {"validationResponse": "tok-1"}
    assert answer(b'{"type": "x"}', headers)[0] == "refused"  # a body the signature is not for


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def handshake_with(url: str, django_user_model) -> str:
    """A subscription to `url` awaiting confirmation; its real handshake sent to the receiver: what came of it."""
    owner, _ = django_user_model.objects.get_or_create(username="docs-receiver")
    topic, _ = Topic.objects.get_or_create(owner=owner, name="docs-receiver")
    endpoint, _ = Endpoint.objects.get_or_create(owner=owner, url=url)
    subscription = Subscription.objects.create(topic=topic, endpoint=endpoint, status="pending_confirmation")
    confirmation.confirmation_request(subscription=subscription)
    outcome = confirmation.send_confirmation_request(subscription.id)
    assert Subscription.objects.get(id=subscription.id).status == ("confirmed" if outcome == "confirmed"
                                                                    else "pending_confirmation")
    return outcome


def check(block: Block, namespace: dict, stand_ins: dict, key: str) -> None:
    """Beyond running: what the block's marker says it is, it does."""
    function = namespace.get(block.function) if block.function else None
    if block.kind == "verifier":
        headers, body = signed_request(stand_ins["SECRET"])
        assert function(stand_ins["SECRET"], headers, body) is True
        assert function(stand_ins["SECRET"], headers, body + b" ") is False  # a changed body
    elif block.kind == "handler":
        headers, body = signed_request(stand_ins["SECRET"])
        request = RequestFactory().post("/", body, content_type="application/json",
                                        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()})
        function(request)  # raises if the signature does not verify
    elif block.kind == "confirming handler":  # a customer's receiver: verifies, answers the confirmation
        confirmation = json.dumps({"type": "herald.subscription.confirmation", "data": {"token": "tok-1"}}).encode()
        headers, body = signed_request(stand_ins["SECRET"], confirmation)
        status, answer = function(body, headers)
        assert status == 200 and json.loads(answer) == {"validationResponse": "tok-1"}
        headers, body = signed_request(stand_ins["SECRET"], b'{"type": "order.placed", "data": {}}')
        assert function(body, headers) == (200, b"")
        try:
            function(body + b" ", headers)
        except Exception:  # the library's verification error
            pass
        else:
            raise AssertionError("a changed body verified")
    elif block.kind == "raw verifier":
        attributes = {"ce-id": "1", "ce-type": "order.created", "content-type": "application/json"}
        stamp = int(time.time())
        headers = {**attributes, "webhook-id": "m", "webhook-timestamp": str(stamp),
                   "herald-attributes-signature": signing.sign(stand_ins["SECRET"], "m", stamp,
                                                               signing.attribute_bytes(attributes))}
        assert function(stand_ins["SECRET"], headers) is not None
    elif block.kind == "ed25519 verifier":
        stamp = int(time.time())
        signed = f"m.{stamp}.".encode() + b"{}"
        signature = base64.b64encode(signing._private(key).sign(signed)).decode()
        headers = {"webhook-id": "m", "webhook-timestamp": str(stamp), "webhook-signature": f"v1a,{signature}"}
        assert function(headers, b"{}") is True and function(headers, b"{ }") is False
    elif block.kind == "pytest test":
        with capture_events() as outbox:
            function(outbox, stand_ins["client"])


# --- README's API table and the OpenAPI schema ------------------------------------------------------------------------

def table_operations() -> set[tuple[str, str]]:
    """(method, path with every {parameter} as {}) of each operation README's API table names."""
    table = (ROOT / "README.md").read_text().split("| method, path |")[1].split("\n\n")[0]
    found = set()
    for row in table.splitlines()[2:]:
        first, description = row.split("|")[1], row.split("|")[2]
        on = re.search(r"\(on `([^`]+)`\)", description)
        spans = re.findall(r"`([^`]+)`", first)
        base = on.group(1) if on else next((span.split()[-1] for span in spans if "{id}" in span), "")
        base = base[:base.index("{id}") + len("{id}/")] if "{id}" in base else base
        for span in spans:
            *methods, path = span.split()
            path = path.split("?")[0]
            path = base + path[2:] if path.startswith("…/") else path
            found |= {(method, re.sub(r"\{\w+\}", "{}", path)) for method in methods}
    return found


def schema_operations() -> set[tuple[str, str]]:
    with patched_settings(SCHEMA):
        paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    return {(method.upper(), re.sub(r"\{\w+\}", "{}", path)) for path, operations in paths.items()
            for method in operations}


def test_readmes_api_table_names_every_operation_and_only_those():
    table, schema = table_operations(), schema_operations()
    assert sorted(schema - table) == [], "in the API, missing from README's table"
    assert sorted(table - schema) == [], "in README's table, not in the API"

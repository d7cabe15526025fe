"""OpenTelemetry traces (delivery/engine/plumbing/tracing.py, docs/operators.md "Tracing").

The first test runs Herald as the Procfile does (gunicorn, an RQ worker, the scheduler), each exporting real OTLP
to a receiver in this test that decodes the protobuf, and checks the span tree of a publish whose delivery fails
once and then succeeds. The others run in this process with the SDK's in-memory exporter."""

import json
import subprocess
import sys
from datetime import timedelta
from secrets import token_hex

import pytest
import requests
from django.utils import timezone
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.authtoken.models import Token

from delivery import events
from delivery.engine.claiming import leases
from delivery.engine.plumbing import tracing
from delivery.engine.scheduler import dispatch
from delivery.management import localredis
from delivery.models import Delivery, Message
from subscriptions.models import Subscription, Topic
from tests import fence, otlp
from tests.conftest import ROOT, publish, settle, subprocess_env, subscribe, wait_until
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
RETRY_FAST = {"retrySchedule": {"delays": [0.5]}, "retryLimits": {"maxAttempts": 3}}


def otel_env(collector: otlp.Collector, service: str) -> dict:
    return {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "100"}


@pytest.fixture
def collector():
    server, collector = otlp.serve()
    yield collector
    server.shutdown()


def _answers(base: str) -> bool:
    try:
        return requests.get(f"{base}/api/", timeout=10).status_code == 401
    except requests.RequestException:
        return False


def fails_once(receiver):
    """The traced endpoint answers 500 to its first request, then 200; the plain one always 200."""
    def reply(request) -> Reply:
        tried = sum(1 for seen in receiver.requests if "plain" not in seen.path)
        return Reply(status=500 if "plain" not in request.path and tried <= 1 else 200)
    return reply


def test_a_retried_delivery_is_one_trace_from_the_callers_request_to_the_endpoint(
        api, user, receiver, processes, collector, tmp_path):
    receiver.script = fails_once(receiver)
    topic = api.post("/api/topics/", {"name": "traced"}, format="json").json()
    traced = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                              "delivery_policy": RETRY_FAST}, format="json").json()
    plain = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "?plain",
                                             "send_trace_context": False}, format="json").json()
    assert traced["send_trace_context"] is True and plain["send_trace_context"] is False

    port = localredis.free_port()
    web_log, worker_log = tmp_path / "web.log", tmp_path / "worker.log"
    with open(web_log, "w") as output:
        web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "project.wsgi", "-c", "python:project.gunicorn", "--bind",
             f"127.0.0.1:{port}", "--workers", "1"], cwd=ROOT, env=subprocess_env(**otel_env(collector, "herald-web")),
            stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    fence.allow("127.0.0.1", port)  # this test's own requests to the gunicorn it started
    try:
        wait_until(lambda: _answers(base), timeout=30, interval=0.2)
        with open(worker_log, "w") as output:
            processes.worker(output=output, **otel_env(collector, "herald-worker"))
        processes.cron(**otel_env(collector, "herald-scheduler"))
        caller_trace, caller_span = token_hex(16), token_hex(8)
        answer = requests.post(f"{base}/api/topics/{topic['id']}/publish/", json={"payload": {"n": 1}}, timeout=30,
                               headers={"Authorization": f"Token {Token.objects.get(user=user).key}",
                                        "traceparent": f"00-{caller_trace}-{caller_span}-01"})
        assert answer.status_code == 202, answer.text
        receiver.wait_for(3, timeout=60)
        wait_until(lambda: len(collector.named("herald attempt", caller_trace)) == 3
                   and collector.named("herald publish", caller_trace), timeout=30)
    finally:
        web.terminate()
        web.wait(20)

    (served,) = collector.named("POST /api/topics/{pk}/publish/", caller_trace)
    (published,) = collector.named("herald publish", caller_trace)
    (fanned,) = collector.named("herald fan-out", caller_trace)
    assert (served.service, served.kind, served.parent_id) == ("herald-web", "server", caller_span)
    assert (served.attributes["http.request.method"], served.attributes["http.route"],
            served.attributes["http.response.status_code"]) == ("POST", "/api/topics/{pk}/publish/", 202)
    assert served.attributes["server.address"] == f"127.0.0.1:{port}"
    assert (published.service, published.kind, published.parent_id) == ("herald-web", "producer", served.span_id)
    assert published.attributes["messaging.destination.name"] == "traced"
    assert published.attributes["herald.owner"] == user.id
    assert (fanned.service, fanned.parent_id, fanned.attributes["herald.deliveries"]) == ("herald-web",
                                                                                          published.span_id, 2)
    assert Message.objects.get().trace_parent == f"00-{caller_trace}-{published.span_id}-01"

    tries = sorted(collector.named("herald attempt", caller_trace), key=lambda span: span.start_ns)
    assert {span.service for span in tries} == {"herald-worker"}
    assert all(span.parent_id == published.span_id and span.kind == "client" for span in tries)
    mine = [span for span in tries if span.attributes["herald.subscription"] == traced["id"]]
    assert [(s.attributes["herald.attempt"], s.attributes["herald.outcome"], s.attributes["http.response.status_code"],
             s.attributes.get("error.type"), s.status) for s in mine] == [
        (1, "retryable_failure", 500, "http_status", 2), (2, "success", 200, None, 0)]
    for span in tries:
        assert span.attributes["herald.owner"] == user.id and span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["herald.recorded"] is True and "request sent" in span.events

    # the endpoint continues the trace: each try carries its own span as the parent; the opted-out one, nothing
    sent = [(request.path, request.headers.get("traceparent")) for request in receiver.requests]
    assert sorted(header for path, header in sent if "plain" not in path) == sorted(
        f"00-{caller_trace}-{span.span_id}-01" for span in mine)
    assert [header for path, header in sent if "plain" in path] == [None]
    # and the worker's attempt lines name the trace
    assert worker_log.read_text().count(f"trace_id={caller_trace}") == 3


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.start(provider)
    yield exporter
    tracing.stop()


def named(exporter, name: str) -> list:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def test_a_publish_inside_the_callers_span_is_its_child(api, receiver, spans, run_worker):
    receiver.script = lambda request: Reply(status=200)
    topic = api.post("/api/topics/", {"name": "host"}, format="json").json()
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json")
    host_tracer = TracerProvider().get_tracer("host")  # a host project's request span (its Django instrumentation)
    with host_tracer.start_as_current_span("GET /orders/") as request_span:
        events.publish(Topic.objects.get(id=topic["id"]), {"order": 1})
    settle()
    (published,) = named(spans, "herald publish")
    (attempt,) = named(spans, "herald attempt")
    assert published.parent.span_id == request_span.get_span_context().span_id
    assert attempt.context.trace_id == request_span.get_span_context().trace_id
    assert attempt.parent.span_id == published.context.span_id


def test_a_replay_starts_its_own_trace_linked_to_the_publish(api, receiver, spans, run_worker):
    receiver.script = lambda request: Reply(status=200)
    topic = api.post("/api/topics/", {"name": "again"}, format="json").json()
    sub = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json").json()
    publish(api, topic, "once")
    settle()
    replayed = api.post(f"/api/subscriptions/{sub['id']}/replay/", {"since": "2000-01-01T00:00:00Z"}, format="json")
    assert replayed.status_code == 202, replayed.content
    settle()
    (published,) = named(spans, "herald publish")
    first, again = sorted(named(spans, "herald attempt"), key=lambda span: span.start_time)
    assert first.parent.span_id == published.context.span_id
    assert again.parent is None and again.context.trace_id != published.context.trace_id
    assert [link.context.span_id for link in again.links] == [published.context.span_id]
    assert again.attributes["herald.replay"] is not None
    assert receiver.requests[1].headers["traceparent"].split("-")[1] == f"{again.context.trace_id:032x}"


def test_a_traceparent_sent_with_a_rest_publish_is_the_publishs_parent(api, receiver, spans, run_worker):
    topic = api.post("/api/topics/", {"name": "rest"}, format="json").json()
    caller = f"00-{token_hex(16)}-{token_hex(8)}-01"
    for header in (caller, "00-not-a-trace-01", "x" * 500):  # a malformed one is ignored: the publish is a root
        assert api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json",
                        HTTP_TRACEPARENT=header).status_code == 202
    joined, alone, too_long = sorted(named(spans, "herald publish"), key=lambda span: span.start_time)
    requests_ = sorted(named(spans, "POST /api/topics/{pk}/publish/"), key=lambda span: span.start_time)
    assert [span.kind.name for span in requests_] == ["SERVER"] * 3
    assert [publish_.parent.span_id for publish_ in (joined, alone, too_long)] == [
        span.context.span_id for span in requests_]  # each publish under its request's SERVER span
    assert f"{requests_[0].parent.span_id:016x}" == caller.split("-")[2]
    assert requests_[1].parent is None and requests_[2].parent is None


def test_every_request_of_the_web_process_has_its_server_span(api, spans):
    assert api.get("/api/topics/").status_code == 200
    assert api.get("/api/topics/99999/").status_code == 404
    listed, missing = sorted(named(spans, "GET /api/topics/") + named(spans, "GET /api/topics/{pk}/"),
                             key=lambda span: span.start_time)
    assert listed.attributes["http.route"] == "/api/topics/" and listed.attributes["http.response.status_code"] == 200
    assert missing.attributes["http.response.status_code"] == 404 and missing.status.is_ok
    assert listed.attributes["url.scheme"] == "http" and listed.attributes["server.address"] == "testserver"


def test_tracing_off_makes_no_span_stores_no_context_and_sends_no_header(api, receiver, run_worker):
    assert not tracing.on()  # the test settings set no OTEL_* variable
    receiver.script = lambda request: Reply(status=200)
    topic = api.post("/api/topics/", {"name": "quiet"}, format="json").json()
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json")
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json",
             HTTP_TRACEPARENT=f"00-{token_hex(16)}-{token_hex(8)}-01")
    settle()
    assert Message.objects.get().trace_parent == ""
    assert "traceparent" not in receiver.requests[0].headers


SETUP = """
import os, sys, logging
logging.basicConfig(level=logging.WARNING, format="%(message)s")
{block}
os.environ.update(DJANGO_SETTINGS_MODULE="tests.settings", OTEL_TRACES_EXPORTER="{exporter}")
import django
django.setup()
from delivery.engine.plumbing import tracing
print("ON" if tracing.on() else "OFF")
"""
WITHOUT_THE_EXTRA = "sys.modules.update({name: None for name in ('opentelemetry', 'opentelemetry.trace')})"


@pytest.mark.parametrize("block, exporter, expected, said", [
    (WITHOUT_THE_EXTRA, "otlp", "OFF", ""),  # the API is missing: Herald runs as without tracing
    ("sys.modules['opentelemetry.sdk.trace'] = None", "otlp", "OFF", "the OpenTelemetry SDK is not installed"),
    ("", "none", "OFF", ""),
    ("", "zipkin", "OFF", "Herald knows otlp and console"),
    ("", "console", "ON", ""),
    ("os.environ['OTEL_SDK_DISABLED'] = 'true'", "otlp", "OFF", ""),
])
def test_what_the_otel_variables_and_the_installed_packages_decide(block, exporter, expected, said):
    run = subprocess.run([sys.executable, "-c", SETUP.format(block=block, exporter=exporter)], cwd=ROOT,
                         env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == expected
    assert said in run.stderr


def test_the_trace_header_is_reserved_for_herald(api, receiver):
    topic = api.post("/api/topics/", {"name": "headers"}, format="json").json()
    answer = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                              "delivery_headers": [{"name": "traceparent", "value": "00-x"}]},
                      format="json")
    assert answer.status_code == 400
    assert "traceparent" in json.dumps(answer.json())


class Broken(SimpleSpanProcessor):
    """A host project's span processor that fails on every span."""

    def __init__(self):
        super().__init__(InMemorySpanExporter())

    def on_start(self, span, parent_context=None):
        raise RuntimeError("a processor that fails")

    def on_end(self, span):
        raise RuntimeError("a processor that fails")


def test_tracing_that_fails_never_fails_a_publish_or_a_delivery(api, receiver, run_worker, caplog):
    provider = TracerProvider()
    provider.add_span_processor(Broken())
    tracing.start(provider)
    try:
        receiver.script = lambda request: Reply(status=200)
        topic = api.post("/api/topics/", {"name": "sturdy"}, format="json").json()
        api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json")
        answer = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json",
                          HTTP_TRACEPARENT=f"00-{token_hex(16)}-{token_hex(8)}-01")
        assert answer.status_code == 202, answer.content
        settle()
    finally:
        tracing.stop()
    assert Delivery.objects.get().status == "succeeded" and len(receiver.requests) == 1
    assert "tracing failed in" in caplog.text  # said, not raised


def test_a_try_whose_worker_stopped_gets_its_span_from_the_scheduler(api, receiver, spans, redis_conn):
    topic, _ = subscribe(api, receiver, {"retrySchedule": {"delays": [5]}, "retryLimits": {"maxAttempts": 3}})
    publish(api, topic)
    (published,) = named(spans, "herald publish")
    [claimed] = leases.claim([Delivery.objects.get().id], timezone.now())  # its worker then dies
    assert dispatch.release_expired_leases(claimed.lease_until + timedelta(seconds=1)) == 1
    (lost,) = named(spans, "herald attempt")
    assert lost.parent.span_id == published.context.span_id
    assert (lost.attributes["herald.outcome"], lost.attributes["error.type"]) == ("retryable_failure",
                                                                                  "lease_expired")


def test_a_trace_header_stored_before_it_was_reserved_is_not_sent(api, receiver, run_worker):
    receiver.script = lambda request: Reply(status=200)
    topic, subscription = subscribe(api, receiver)
    Subscription.objects.filter(id=subscription["id"]).update(  # as stored before the names were reserved
        delivery_headers=[{"name": "Traceparent", "value": "00-forged"}, {"name": "x-kept", "value": "yes"}])
    publish(api, topic)
    settle()
    assert "traceparent" not in receiver.requests[0].headers and receiver.requests[0].headers["x-kept"] == "yes"


HOST = """
import os, sys
os.environ.update(DJANGO_SETTINGS_MODULE="tests.settings", OTEL_TRACES_EXPORTER="{exporter}")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
host = TracerProvider()
if {before}:
    trace.set_tracer_provider(host)  # a host project's set-up before django.setup()
import django
django.setup()
from delivery.engine.plumbing import tracing
if not {before}:
    trace.set_tracer_provider(host)  # ... or after it: Herald never took the global provider
print("ON" if tracing.on() else "OFF", "HOST" if trace.get_tracer_provider() is host else "TAKEN")
"""


@pytest.mark.parametrize("before, exporter, expected", [
    (True, "", "ON HOST"),  # the host's provider, set up first: Herald's spans go there
    (False, "console", "ON HOST"),  # Herald exports with a provider of its own; the host's is still the global one
    (False, "", "OFF HOST"),  # set up after Django and nothing asked Herald for tracing: off
])
def test_a_host_projects_tracer_provider_is_used_or_left_alone(before, exporter, expected):
    run = subprocess.run([sys.executable, "-c", HOST.format(before=before, exporter=exporter)], cwd=ROOT,
                         env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == expected
    assert "Overriding of current TracerProvider is not allowed" not in run.stderr

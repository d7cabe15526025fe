"""One structured log line per attempt (text or JSON), no secrets in it, and RQ's per-job lines off by default."""

import json
import logging

import pytest
from django_rq import get_queue
from rest_framework.test import APIClient

from delivery import heap
from delivery.engine.accounts import tenancy
from delivery.engine.sending import attempts
from delivery.engine.sending.worker import HeraldWorker
from delivery.events import publish as publish_event
from delivery.logformat import JSONFormatter
from delivery.models import Delivery
from subscriptions.models import Topic
from tests.conftest import FAST, publish, subscribe
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_attempt_logs_one_line_with_what_happens_next(api, receiver, caplog, redis_conn):
    receiver.script = [Reply(status=503), Reply(status=200)]
    topic, subscription = subscribe(api, receiver, FAST)
    publish(api, topic, 1)
    publish(api, topic, 2)
    ids = sorted(d["id"] for d in api.get("/api/deliveries/").json()["results"])

    with caplog.at_level(logging.INFO, logger="herald.attempt"):
        attempts.process(ids, "deliveries")

    lines = [r for r in caplog.records if r.name == "herald.attempt"]
    assert len(lines) == 2
    by_status = {r.herald["status"]: r for r in lines}
    failed, ok = by_status[503].herald, by_status[200].herald
    assert failed["error"] == "http_status" and failed["next"].startswith("retry at ")
    assert ok["error"] is None and ok["next"] == "succeeded"
    assert {ok["subscription"], failed["subscription"]} == {subscription["id"]}
    assert ok["endpoint_host"] == "127.0.0.1" and ok["attempt"] == 1 and ok["duration_ms"] >= 0
    assert (ok["outcome"], failed["outcome"]) == ("succeeded", "failed")
    assert ok["owner"] == Topic.objects.get(id=topic["id"]).owner_id and ok["tenant"] is None  # the owner's own
    text = by_status[503].getMessage()
    assert "status=503" in text and "error=http_status" in text and "next=retry at" in text
    assert "/hook" not in text and subscription["secret"] not in text  # the host only; never a secret


def test_json_lines_carry_the_fields_at_the_top_level(api, receiver, caplog, redis_conn):
    topic, _ = subscribe(api, receiver, FAST)
    publish(api, topic)
    [delivery_id] = [d["id"] for d in api.get("/api/deliveries/").json()["results"]]
    with caplog.at_level(logging.INFO, logger="herald.attempt"):
        attempts.process([delivery_id], "deliveries")

    [record] = [r for r in caplog.records if r.name == "herald.attempt"]
    line = json.loads(JSONFormatter().format(record))
    assert (line["level"], line["logger"], line["delivery"], line["status"], line["next"]) == (
        "INFO", "herald.attempt", delivery_id, 200, "succeeded")


def test_a_tenants_attempt_lines_name_the_tenant(api, receiver, caplog, redis_conn, user):
    tenant, _ = tenancy.tenant_create(owner=user, external_id="acme")
    topic = api.post("/api/topics/", {"name": "t", "open_to_tenants": True}, format="json").json()
    key = tenancy.tenant_key_create(tenant=tenant)[1]
    acme = APIClient()
    acme.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert acme.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url},
                     format="json").status_code == 201
    publish_event("t", {"n": 1}, owner=user, tenant="acme")
    with caplog.at_level(logging.INFO, logger="herald.attempt"):
        attempts.process(list(Delivery.objects.values_list("id", flat=True)), "deliveries")
    [record] = [r for r in caplog.records if r.name == "herald.attempt"]
    assert record.herald["tenant"] == "acme" and "tenant=acme" in record.getMessage()


def test_the_worker_keeps_rqs_per_job_lines_off(redis_conn, settings, monkeypatch):
    settings.HERALD_RQ_LOG_LEVEL = "WARNING"
    monkeypatch.setattr(heap, "settle", lambda: None)  # the test process's collector is left as it is
    worker = HeraldWorker([get_queue("deliveries")], connection=redis_conn)
    worker.work(burst=True, logging_level="INFO")  # what `rqworker` asks for
    assert logging.getLogger("rq.worker").level == logging.WARNING

"""Standard Webhooks' sender rules and wire format to the letter (tests/facts/standard_webhooks.json, each case with
the spec's words): a real receiver answers each status, a real worker sends and records, and what Herald does next
is checked; the deliveries are verified with the official `standardwebhooks` library."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

from delivery.engine.state.effective import policy_for
from delivery.models import Delivery
from subscriptions.models import Endpoint
from tests.conftest import publish, subscribe
from tests.receiver import Reply

FACTS = json.loads((Path(__file__).resolve().parents[1] / "facts" / "standard_webhooks.json").read_text())
RETRY_AFTER_5 = {"retrySchedule": {"delays": [5, 5]}, "retryLimits": {"maxAttempts": 3}}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", FACTS["answers"], ids=lambda case: f"{case['status']}-{case['then']}")
def test_what_the_sender_does_with_each_answer(api, receiver, run_worker, case):
    body = b"" if case["status"] == 204 else b'{"ok":true}'  # (a 204 has no body: HTTP forbids one)
    receiver.script = [Reply(status=case["status"], headers=case.get("headers", {}), body=body)]
    topic, subscription = subscribe(api, receiver, RETRY_AFTER_5)
    publish(api, topic)

    run_worker()

    delivery = Delivery.objects.get()
    then = case["then"]
    if then == "success":
        assert delivery.status == "succeeded"
    elif then == "disable":
        assert delivery.status == "dead_lettered"
        assert Endpoint.objects.get(id=delivery.endpoint_id).state == "frozen"
    else:
        waited = (delivery.next_attempt_at - delivery.last_attempt_at).total_seconds()
        expected = float(then.split()[-1])
        assert delivery.status == "pending" and expected - 0.5 <= waited <= expected + 0.5, (then, waited)
    assert len(receiver.requests) == 1  # a redirect is never followed


@pytest.mark.django_db(transaction=True)
def test_the_wire_facts(api, receiver, run_worker):
    assert {fact["fact"] for fact in FACTS["wire"]} == {"headers", "verifies", "same id on retry", "timeout"}
    receiver.script = [Reply(status=500), Reply(status=200)]
    topic, subscription = subscribe(api, receiver, {"retrySchedule": {"delays": [0]}, "retryLimits": {
        "maxAttempts": 2}})
    publish(api, topic, {"n": 1})

    run_worker()
    Delivery.objects.update(next_attempt_at=Delivery.objects.get().last_attempt_at - timedelta(seconds=1))
    run_worker()

    first, second = receiver.wait_for(2)
    for request in (first, second):
        assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= set(request.headers)
        assert request.headers["webhook-timestamp"].isdigit()
        Webhook(subscription["secret"]).verify(request.body, request.headers)  # raises unless it verifies
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert 15 <= policy_for(None, None).timeout_seconds <= 30  # the default, within the spec's range

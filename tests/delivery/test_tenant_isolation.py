"""One owner's slow parts never hold another's deliveries (issue: tenant isolation), through one real worker, so
that anything done on the worker's job thread would show: a confirmation target that never answers and a token URL
that answers after 9 s hold only their own owner's sends. What is asserted is order, not speed: the other owner's
events arrive while the slow requests are still unanswered.

Elsewhere: fair claiming (tests/delivery/engine/claiming/test_leases.py, test_due_work.py and
tests/delivery/rules/test_claim_turns.py), per-publish cost of every filter operator
(tests/delivery/rules/filters/test_matching.py), the fan-out report (tests/delivery/web/api/test_messages.py),
storage per batch request (tests/delivery/test_batching.py), quotas (tests/delivery/engine/accounts/test_quotas.py)."""

import json

import pytest

from subscriptions.models import Subscription
from tests.conftest import publish, subscribe, wait_until
from tests.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)
HANG_SECONDS = 9


@pytest.fixture
def slow():
    """A receiver that accepts every request and answers only after HANG_SECONDS."""
    server = Receiver()
    server.script = [Reply(delay=HANG_SECONDS)]
    yield server
    server.close()


def echo(request):
    """Bob's endpoint: answers the handshake, accepts events."""
    body = request.json()
    if body.get("type") == "herald.subscription.confirmation":
        return Reply(body=json.dumps({"validationResponse": body["data"]["token"]}).encode())
    return Reply()


def test_a_confirmation_target_that_never_answers_holds_no_worker(api, other_api, receiver, slow, processes,
                                                                   settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    for n in range(3):  # alice: three subscriptions whose handshakes hang
        subscribe(other_api, slow, name=f"alice-{n}")
    processes.worker()
    slow.wait_for(3, timeout=30)
    asked_at = min(request.at for request in slow.requests)

    receiver.script = echo
    topic, bob = subscribe(api, receiver, name="bob")
    wait_until(lambda: Subscription.objects.get(id=bob["id"]).status == "confirmed", timeout=HANG_SECONDS - 1)
    publish(api, topic, "after the handshake")
    arrived = receiver.wait_for(2, timeout=HANG_SECONDS)
    events = [r for r in arrived if r.json()["type"] != "herald.subscription.confirmation"]
    assert events and max(r.at for r in events) < asked_at + HANG_SECONDS  # alice's handshakes were still hanging
    assert Subscription.objects.filter(topic__name__startswith="alice", status="pending_confirmation").count() == 3


def test_a_slow_token_url_holds_only_its_own_sends(api, other_api, receiver, slow, processes, redis_conn):
    for n in range(4):  # alice: four subscriptions whose token URL answers after 9 s
        other_api.post("/api/topics/", {"name": f"alice-{n}"}, format="json")
        created = other_api.post("/api/subscriptions/", {
            "topic": f"alice-{n}", "endpoint": slow.url, "oauth_token_url": slow.url + f"/token{n}",
            "oauth_client_id": "alice", "oauth_client_secret": "s"}, format="json")
        assert created.status_code == 201, created.content
    topic, _ = subscribe(api, receiver, name="bob")
    processes.worker()
    for n in range(4):
        other_api.post(f"/api/topics/alice-{n}/publish/", {"payload": n}, format="json")
    slow.wait_for(4, timeout=30)  # every token request is on its way
    asked_at = min(request.at for request in slow.requests)
    for n in range(5):
        publish(api, topic, n)
    events = receiver.wait_for(5, timeout=HANG_SECONDS)
    assert max(r.at for r in events) < asked_at + HANG_SECONDS  # while alice's token URL had not answered

"""The engine's middle, one piece at a time: claim, the lease check in write_back, hold and probe (gate), throttle
(and its Redis script), record. Time is passed in; nothing sleeps.

These run on PostgreSQL with the rest of the suite and again on SQLite (tests/test_sqlite.py), the database
`make run` uses, whose claim and write-back take their own code paths."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.claiming import leases, throttle
from delivery.engine.sending import attempts, recording
from delivery.engine.state import transitions
from delivery.engine.state.effective import subscription_policy
from delivery.models import Attempt, Delivery
from delivery.rules.decisions import Decision
from delivery.rules.vocabulary import Action, AttemptOutcome
from delivery.transport.posting import SendResult
from subscriptions.models import Endpoint
from tests.conftest import FAST, publish, subscribe

pytestmark = pytest.mark.django_db(transaction=True)


def test_claim_takes_due_pending_rows_once(three):
    now = timezone.now()
    Delivery.objects.filter(id=three[2]).update(next_attempt_at=now + timedelta(minutes=1))  # not due yet

    claimed = leases.claim(three, now)

    assert [d.id for d in claimed] == three[:2]
    assert all(d.status == "in_flight" and d.lease_until > now for d in claimed)
    assert set(Delivery.objects.filter(status="in_flight").values_list("id", flat=True)) == set(three[:2])
    assert leases.claim(three, now) == []  # a duplicate job finds nothing to do


def test_write_back_applies_only_under_the_lease_it_took(three):
    now = timezone.now()
    claimed = leases.claim(three, now)
    moved_on = claimed[0]
    Delivery.objects.filter(id=moved_on.id).update(lease_until=now + timedelta(hours=1))  # another job's lease now
    done = transitions.attempted(claimed[1], Decision(Action.SUCCEED, AttemptOutcome.SUCCESS), now=now)

    written = leases.write_back(claimed, {moved_on.id: done, claimed[1].id: done})

    assert written == {claimed[1].id}
    assert Delivery.objects.get(id=moved_on.id).status == "in_flight"
    assert Delivery.objects.get(id=claimed[1].id).status == "succeeded"


@pytest.mark.parametrize("state,expected", [("active", "sent"), ("frozen", "held"), ("disabled", "probe")])
def test_gate_by_endpoint_state(three, state, expected):
    now = timezone.now()
    Endpoint.objects.update(state=state, next_probe_at=now - timedelta(seconds=1))
    claimed = leases.claim(three, now)
    ready = [(d, subscription_policy(d.subscription)) for d in claimed]
    updates: dict = {}

    allowed, probes = attempts.gated(ready, updates, now)

    if expected == "sent":
        assert len(allowed) == 3 and not updates and not probes
    elif expected == "held":
        assert allowed == [] and updates == {i: transitions.on_hold() for i in three}
    else:  # one probe per disabled endpoint per interval; the rest are held
        assert [d.id for d, _ in allowed] == [three[0]] and probes == {three[0]}
        assert updates == {i: transitions.on_hold() for i in three[1:]}
        assert attempts.gated(ready[1:], {}, now)[0] == []  # the slot is taken until the next interval


def test_throttled_rows_are_deferred_not_attempted(api, receiver, redis_conn):
    topic, _ = subscribe(api, receiver, {**FAST, "throttlePolicy": {"maxReceivesPerSecond": 2}})
    for n in range(5):
        publish(api, topic, n)
    now = timezone.now()
    claimed = leases.claim(list(Delivery.objects.values_list("id", flat=True)), now)
    updates: dict = {}

    before = time.monotonic()
    units = [[(d, subscription_policy(d.subscription))] for d in claimed]  # one request each
    allowed, deadlines = attempts.throttled(units, updates, now)

    assert len(allowed) == 2 and len(updates) == 3
    assert all(change["status"] == "pending" and now < change["next_attempt_at"] <= now + timedelta(seconds=1.15)
               for change in updates.values())
    # The two granted sends must start within the slack after their grant, or go back unsent.
    assert set(deadlines) == {unit[0][0].id for unit in allowed}
    assert all(before < deadline <= time.monotonic() + throttle.START_SLACK_SECONDS for deadline in deadlines.values())


def test_record_writes_attempts_deliveries_and_endpoint_health_together(three):
    now = timezone.now()
    claimed = leases.claim(three, now)
    ok = SendResult(status=200, duration_ms=4, started_at=now.timestamp(), headers={"X": "1"})
    failed = SendResult(status=503, duration_ms=4, started_at=now.timestamp(), error_class="http_status")
    tries = [recording.Tried(claimed[0], subscription_policy(claimed[0].subscription), 1, None, ok, "deliveries"),
             recording.Tried(claimed[1], subscription_policy(claimed[1].subscription), 1, None, failed, "deliveries")]
    untried = {claimed[2].id: transitions.on_hold()}

    recording.record(claimed, tries, untried, set())

    rows = {d.id: d for d in Delivery.objects.all()}
    assert (rows[three[0]].status, rows[three[0]].attempt_count) == ("succeeded", 1)
    assert (rows[three[1]].status, rows[three[1]].attempt_count) == ("pending", 1)
    assert rows[three[1]].next_attempt_at == now + timedelta(milliseconds=4, seconds=5)
    assert (rows[three[2]].status, rows[three[2]].next_attempt_at, rows[three[2]].attempt_count) == (
        "pending", None, 0)
    assert sorted(Attempt.objects.values_list("delivery_id", "outcome")) == [
        (three[0], "success"), (three[1], "retryable_failure")]
    endpoint = Endpoint.objects.get()
    assert (endpoint.window_attempts, endpoint.window_failures, endpoint.consecutive_failures) == (2, 1, 1)

    recording.record(claimed, tries, untried, set())  # recording again changes nothing: the leases are spent
    assert Attempt.objects.count() == 2


def test_process_sends_due_rows_and_settles_the_rest(three, receiver):
    Delivery.objects.filter(id=three[2]).update(next_attempt_at=timezone.now() + timedelta(minutes=1))

    assert attempts.process(three, "deliveries") == 2

    assert sorted(r.json()["data"] for r in receiver.requests) == [0, 1]
    assert list(Delivery.objects.order_by("id").values_list("status", flat=True)) == [
        "succeeded", "succeeded", "pending"]

"""The pump (engine/sending/pump.py) on its own: a fake transport answers in place of the network, and the clock
is passed in, so what is claimed, how many go to one endpoint at once, what is recorded at which time and when the
pump stops are all checked exactly. (The real transport and real receivers are tests/delivery/test_throughput.py's
and the end-to-end tests'.)"""

import threading
import time
from collections import Counter
from concurrent.futures import Future
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.intake.publishing import message_publish
from delivery.engine.sending import attempts, handover, pump
from delivery.models import Attempt, Delivery
from delivery.transport.posting import SendResult
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
CLOCK = timezone.now()  # the pump's "now", set before each test: later than every publish of the test


@pytest.fixture(autouse=True)
def _clock():
    """Five minutes ahead of the test's start (not of the suite's: a long suite reaches this file later)."""
    global CLOCK
    CLOCK = timezone.now() + timedelta(minutes=5)


class FakeTransport:
    """Answers `status` for each request, when the test says so (`answer`), or at once with `instant`; notes the
    most requests one endpoint had in flight together."""

    def __init__(self, *, status=200, instant=True, max_in_flight=256):
        self.status, self.instant, self.max_in_flight = status, instant, max_in_flight
        self.duration_ms = 3  # how long each answer says it took
        self.open: list[tuple[object, Future]] = []
        self.shares: dict = {}  # future -> share
        self.sent: list = []
        self.busiest: Counter = Counter()
        self._now: Counter = Counter()

    @property
    def pending(self) -> int:
        return len(self.open)

    active = pending  # nothing stalls here

    def active_by_share(self) -> Counter:
        return Counter(self.shares[future] for _, future in self.open)

    def submit(self, request, *, timeout, key=None, share=None, start_by=None) -> Future:
        future = Future()
        self.shares[future] = share
        self.sent.append((key, request))
        self._now[key] += 1
        self.busiest[key] = max(self.busiest[key], self._now[key])
        self.open.append((key, future))
        if self.instant:
            self.answer()
        return future

    def answer(self, key=None) -> None:
        """Answer every open request (of endpoint `key`, if given)."""
        for item in [(k, f) for k, f in self.open if key is None or k == key]:
            self.open.remove(item)
            self._now[item[0]] -= 1
            item[1].set_result(SendResult(status=self.status, duration_ms=self.duration_ms, started_at=time.time()))


def subscribe(user, name, url):
    topic, _ = topic_create(owner=user, name=name)
    subscription, _ = subscription_create(topic=topic, endpoint=url)
    return topic, subscription


def test_it_delivers_everything_due_and_stops_when_nothing_is(user, redis_conn):
    topic, _ = subscribe(user, "pumped", "http://127.0.0.1:9/a")
    for n in range(150):
        message_publish(topic=topic, payload={"n": n})
    transport = FakeTransport()

    sent = pump.drain("deliveries", transport=transport, clock=lambda: CLOCK)

    assert sent == 150 and len(transport.sent) == 150
    assert set(Delivery.objects.values_list("status", "attempt_count")) == {("succeeded", 1)}
    assert set(Delivery.objects.values_list("delivered_at", flat=True)) != {CLOCK}  # the answer's time, not ours
    assert Attempt.objects.filter(outcome="success").count() == 150


def test_one_endpoint_never_has_more_than_its_share_in_flight(user, redis_conn, settings):
    settings.HERALD_MAX_IN_FLIGHT_PER_ENDPOINT = 4
    slow_topic, slow = subscribe(user, "slow", "http://127.0.0.1:9/slow")
    fast_topic, fast = subscribe(user, "fast", "http://127.0.0.1:9/fast")
    for n in range(20):
        message_publish(topic=slow_topic, payload={"n": n})
        message_publish(topic=fast_topic, payload={"n": n})

    class SlowOne(FakeTransport):
        def submit(self, request, *, timeout, key=None, share=None, start_by=None):
            future = super().submit(request, timeout=timeout, key=key, share=share, start_by=start_by)
            if key == fast.endpoint_id:
                self.answer(fast.endpoint_id)
            elif self._now[slow.endpoint_id] >= 4:  # the slow endpoint answers only once its four are waiting
                self.answer(slow.endpoint_id)
            return future

    transport = SlowOne(instant=False)
    assert pump.drain("deliveries", transport=transport, clock=lambda: CLOCK) == 40
    assert transport.busiest[slow.endpoint_id] == 4
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}


def test_a_2xx_gives_its_slot_to_the_next_claim_before_it_is_recorded_and_a_failure_does_not(user, redis_conn,
                                                                                              settings):
    """The pump claims before it records what was answered: an answered 2xx frees its endpoint's slot for that
    claim, an answered failure keeps it until it is recorded (its endpoint's health first)."""
    settings.HERALD_MAX_IN_FLIGHT_PER_ENDPOINT = 2
    topic, _ = subscribe(user, "refill", "http://127.0.0.1:9/r")
    for n in range(6):
        message_publish(topic=topic, payload={"n": n})
    transport, futures, probes = FakeTransport(instant=False), {}, set()
    assert pump.claim_and_start(futures, probes, 10, 2, transport=transport, now=CLOCK)[0] == 2
    transport.answer()  # 200 for both, not recorded yet
    answered = set(futures)
    assert pump.claim_and_start(futures, probes, 10, 2, transport=transport, now=CLOCK)[0] == 0  # still held
    assert pump.claim_and_start(futures, probes, 10, 2, transport=transport, now=CLOCK, answered=answered)[0] == 2
    attempts.record_sends(answered, futures, probes, CLOCK)
    assert Delivery.objects.filter(status="succeeded").count() == 2 and len(futures) == 2
    transport.status = 503
    transport.answer()
    failed = set(futures)
    assert pump.claim_and_start(futures, probes, 10, 2, transport=transport, now=CLOCK, answered=failed)[0] == 0
    attempts.record_sends(failed, futures, probes, CLOCK)
    assert Delivery.objects.filter(status="pending", attempt_count=1).count() == 2


def test_an_endpoint_answering_2xx_has_a_second_room_claimed_ahead_and_one_that_fails_does_not(user, redis_conn,
                                                                                              settings):
    settings.HERALD_MAX_IN_FLIGHT_PER_ENDPOINT = 2
    topic, subscription = subscribe(user, "ahead", "http://127.0.0.1:9/a")
    for n in range(8):
        message_publish(topic=topic, payload={"n": n})
    endpoint = subscription.endpoint_id
    transport, futures, probes = FakeTransport(instant=False), {}, set()
    assert pump.claim_and_start(futures, probes, 10, 2, transport=transport, now=CLOCK)[0] == 2
    answering: set[int] = set()
    transport.duration_ms = pump.AHEAD_AFTER_MS  # 2xx, slowly
    transport.answer()
    pump.answers_came(answering, set(futures), futures)
    assert answering == {endpoint}
    # Its room (2) and a second room ahead: two more than without; then nothing until answers come.
    assert pump.claim_and_start(futures, probes, 10, 2, transport=transport, now=CLOCK, answered=set(futures),
                                ahead=answering)[0] == 4
    assert pump.claim_and_start(futures, probes, 10, 2, transport=transport, now=CLOCK, answered=set(),
                                ahead=answering)[0] == 0
    transport.status = 503
    transport.answer()
    pump.answers_came(answering, {f for f in futures if f.result().status == 503}, futures)
    assert answering == set()  # a failure: nothing ahead until it answers 2xx again (slowly)
    fast = {Future(): futures[next(iter(futures))]}
    next(iter(fast)).set_result(SendResult(status=200, duration_ms=pump.AHEAD_AFTER_MS - 1))
    pump.answers_came(answering, set(fast), fast)
    assert answering == set()  # a fast endpoint waits little for the next claim: nothing claimed ahead
    slow = {Future(): futures[next(iter(futures))]}
    next(iter(slow)).set_result(SendResult(status=200, duration_ms=pump.AHEAD_AFTER_MS))
    pump.answers_came(answering, set(slow), slow)
    assert answering == {endpoint}


def test_rows_not_due_at_its_clock_are_left_alone(user, redis_conn):
    topic, _ = subscribe(user, "later", "http://127.0.0.1:9/a")
    for n in range(3):
        message_publish(topic=topic, payload={"n": n})
    Delivery.objects.update(next_attempt_at=CLOCK + timedelta(seconds=1))
    transport = FakeTransport()
    assert pump.drain("deliveries", transport=transport, clock=lambda: CLOCK) == 0
    assert transport.sent == [] and set(Delivery.objects.values_list("status", flat=True)) == {"pending"}


def test_a_failed_answer_is_scheduled_by_the_policy_from_the_answer(user, redis_conn):
    topic, _ = topic_create(owner=user, name="failing")
    subscription_create(topic=topic, endpoint="http://127.0.0.1:9/a",
                        delivery_policy={"retrySchedule": {"delays": [30]}, "retryLimits": {"maxAttempts": 3}})
    message_publish(topic=topic, payload={})
    transport, now = FakeTransport(status=503), timezone.now()

    assert pump.drain("deliveries", transport=transport, clock=lambda: now) == 1  # the retry is not due at `now`

    row = Delivery.objects.get()
    assert (row.status, row.attempt_count) == ("pending", 1)
    retry_in = (row.next_attempt_at - row.last_attempt_at).total_seconds()
    assert 30 * 0.8 <= retry_in <= 30 * 1.2  # the policy's delay (with its jitter), counted from the answer


def test_a_stream_of_publishes_is_gathered_into_one_claim_and_a_lone_publish_is_not(user, redis_conn, settings,
                                                                                      monkeypatch):
    """A lingering pump woken by a publish soon after the previous wake waits HERALD_PUMP_GATHER_MS and takes what
    arrived meanwhile in one claim (a round's cost is per claim); the first publish after a quiet spell is claimed
    at once."""
    settings.HERALD_PUMP_GATHER_MS = 400  # (generous: publishes on a loaded machine are slow to arrive)
    settings.HERALD_PUMP_LINGER_SECONDS = 3
    topic, _ = subscribe(user, "stream", "http://127.0.0.1:9/s")
    claims, claim_due = [], pump.leases.claim_due

    def counted(*args, **kwargs):
        claimed, more = claim_due(*args, **kwargs)
        if claimed:
            claims.append((time.monotonic(), len(claimed)))
        return claimed, more

    monkeypatch.setattr(pump.leases, "claim_due", counted)
    transport = FakeTransport()
    done = []
    thread = threading.Thread(target=lambda: (done.append(pump.drain("deliveries", transport=transport,
                                                                     clock=lambda: timezone.now())),
                                              connections.close_all()))
    thread.start()
    time.sleep(0.2)  # the pump lingers
    published = time.monotonic()
    message_publish(topic=topic, payload={"n": 0})
    wait_until(lambda: len(transport.sent) == 1, timeout=10)
    assert claims[0][0] - published < 0.4  # a lone publish: not gathered
    for n in range(1, 6):
        message_publish(topic=topic, payload={"n": n})
    wait_until(lambda: len(transport.sent) == 6, timeout=10)
    thread.join(10)
    assert done == [6] and not thread.is_alive()
    assert [size for _, size in claims][1:] == [5]  # the stream's five in one claim


def test_a_stopping_worker_claims_nothing(user, redis_conn):
    topic, _ = subscribe(user, "stopping", "http://127.0.0.1:9/a")
    message_publish(topic=topic, payload={})
    pump.stopping.set()
    try:
        assert pump.drain("deliveries", transport=FakeTransport(), clock=lambda: CLOCK) == 0
    finally:
        pump.stopping.clear()
    assert Delivery.objects.get().status == "pending"


def test_a_pump_whose_time_is_up_hands_its_unanswered_sends_over(user, redis_conn, settings):
    """A send that may take its whole timeout (an endpoint that accepts and never answers) does not keep a pump whose
    time is up from ending: the next pump of the process takes it over, counts it and records its answer; one that
    completes before any pump takes it is recorded by the process's recorder thread; a worker that stops records
    what is left."""
    settings.HERALD_PUMP_SECONDS = 0.3
    topic, _ = subscribe(user, "handover", "http://127.0.0.1:9/h")
    for n in range(3):
        message_publish(topic=topic, payload={"n": n})
    transport = FakeTransport(instant=False)  # answers only when told

    def in_thread(target):
        results = []

        def run():
            try:
                results.append(target())
            finally:
                connections.close_all()  # this thread's own connection

        thread = threading.Thread(target=run)
        thread.start()
        return thread, results

    first, results = in_thread(lambda: pump.drain("deliveries", transport=transport, clock=lambda: CLOCK))
    first.join(30)
    assert not first.is_alive() and results == [0]  # ended without its answers
    assert len(transport.sent) == 3 and Delivery.objects.filter(status="in_flight").count() == 3

    settings.HERALD_PUMP_SECONDS = 5
    second, results = in_thread(lambda: pump.drain("deliveries", transport=transport, clock=lambda: CLOCK))
    wait_until(lambda: not handover.handed_over.transports())  # taken over
    transport.answer()
    second.join(30)
    assert results == [3] and len(transport.sent) == 3  # recorded by the pump that took them, none sent again
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}

    settings.HERALD_PUMP_SECONDS = 0.3
    message_publish(topic=topic, payload={"n": 3})
    pump.drain("deliveries", transport=transport, clock=lambda: CLOCK)
    assert Delivery.objects.filter(status="in_flight").count() == 1
    transport.answer()  # no pump runs now: the recorder thread records it
    wait_until(lambda: not Delivery.objects.filter(status="in_flight").exists())
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}

    message_publish(topic=topic, payload={"n": 4})
    pump.drain("deliveries", transport=transport, clock=lambda: CLOCK)
    threading.Timer(0.2, transport.answer).start()
    handover.settle(clock=lambda: CLOCK)  # the worker stops: waits for the answer, recorded all the same
    wait_until(lambda: set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"})
    assert handover.handed_over.transports() == []


def test_a_lingering_pump_waits_on_the_announcements_instead_of_polling(user, redis_conn, settings):
    """While nothing is due, a lingering pump reads the work sequence when an announcement wakes it or every
    WAKE_CHECK_SECONDS: a second of lingering is a handful of reads (it was a hundred), and a publish meanwhile is
    still claimed (how soon: the stream test above)."""
    settings.HERALD_PUMP_LINGER_SECONDS = 3
    settings.HERALD_PUMP_GATHER_MS = 0
    topic, _ = subscribe(user, "quiet", "http://127.0.0.1:9/q")

    def reads() -> int:
        return redis_conn.info("commandstats").get("cmdstat_get", {}).get("calls", 0)

    transport, done = FakeTransport(), []
    before = reads()
    thread = threading.Thread(target=lambda: (done.append(pump.drain("deliveries", transport=transport,
                                                                     clock=lambda: timezone.now())),
                                              connections.close_all()))
    thread.start()
    time.sleep(0.5)  # the pump lingers
    message_publish(topic=topic, payload={"n": 1})
    wait_until(lambda: len(transport.sent) == 1, timeout=10)
    thread.join(10)
    assert done == [1] and not thread.is_alive()
    assert reads() - before <= 40  # lingering about 3.5 s in all: polling every 10 ms read it ~350 times


def test_a_pump_lingering_when_its_worker_is_asked_to_stop_ends_at_once_and_passes_on_a_wake(user, redis_conn,
                                                                                            settings):
    """Blocked on the announcements, a lingering pump still ends soon after its worker is asked to stop (about
    WAKE_CHECK_SECONDS and Redis's timer), and a wake it takes meanwhile is put back for another pump."""
    settings.HERALD_PUMP_LINGER_SECONDS = 30
    done = []
    thread = threading.Thread(target=lambda: (done.append(pump.drain("deliveries", transport=FakeTransport(),
                                                                     clock=lambda: timezone.now())),
                                              connections.close_all()))
    thread.start()
    time.sleep(0.5)  # the pump lingers
    pump.stopping.set()
    try:
        stopped = time.monotonic()
        redis_conn.lpush(pump.queues.PUMP_WAKE_KEY, 1)  # a wake that may reach it as it stops
        thread.join(10)
        assert not thread.is_alive() and done == [0]
        assert time.monotonic() - stopped < 5  # (30 s of lingering left)
    finally:
        pump.stopping.clear()
    assert redis_conn.llen(pump.queues.PUMP_WAKE_KEY) == 1  # still there for another lingering pump


def test_a_pump_that_finds_another_gathering_leaves_the_work_to_it_for_a_gathering_time(monkeypatch):
    """In a stream, a lingering pump that finds another pump gathering the announced work leaves it to that one for
    a gathering time (instead of being woken by each publish the other gathers), then lingers again."""
    looks = iter([False, True])  # another pump gathers; then the look is this pump's
    waits = []
    monkeypatch.setattr(pump.queues, "take_look", lambda name, ms: next(looks))
    monkeypatch.setattr(pump, "linger", lambda name, seen: seen + 1)
    monkeypatch.setattr(pump.stopping, "wait", lambda seconds: waits.append(seconds) or False)
    loop = pump.Drain.__new__(pump.Drain)
    loop.queue_name, loop.claim_until = "deliveries", time.monotonic() + 60
    loop.pace = pump.Pace(0, 0)
    monkeypatch.setattr(loop.pace, "gather_for", lambda moment, gather: 0.5)  # a stream: 500 ms gatherings
    assert loop.more_announced() is True
    assert waits == [0.5, 0.5]  # left to the other for a gathering, then its own
    assert loop.pace.seen == 2  # what it left to the other is not announced to it again

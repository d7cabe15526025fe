"""No fault leaves a delivery stuck, wedged or resent forever: hostile receivers, failing jobs, lost jobs, dead
workers, a database whose connections were cut, a Redis that restarted."""

import json
import shutil
import signal
import tempfile
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone
from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus

from delivery.engine.claiming import leases
from delivery.engine.plumbing import queues
from delivery.engine.scheduler import dispatch
from delivery.engine.sending import attempts, jobs, journal, outgoing, recording
from delivery.engine.state import transitions
from delivery.engine.state.effective import subscription_policy
from delivery.management import localredis
from delivery.models import Attempt, Delivery, Exchange
from delivery.rules.storable import TRUNCATED_HEADER
from delivery.rules.wire import OutgoingRequest
from delivery.transport.posting import SendResult
from subscriptions.models import Endpoint
from tests.conftest import FAST, publish, subscribe, wait_until
from tests.receiver import Receiver, Reply


@pytest.fixture
def hostile():
    server = Receiver()
    yield server
    server.close()


def raising(message: str):
    def broken(*args, **kwargs):
        raise RuntimeError(message)

    return broken


def two_tenants(api, other_api, receiver, hostile, policy=None):
    """One topic per tenant; the hostile receiver is the other tenant's."""
    mine, _ = subscribe(api, receiver, policy, name="mine")
    theirs, _ = subscribe(other_api, hostile, policy, name="theirs")
    return mine, theirs


@pytest.mark.django_db(transaction=True)
def test_a_nul_byte_in_a_response_header_is_an_invalid_answer_and_wedges_nobody(api, other_api, receiver, hostile,
                                                                                run_worker):
    """HTTP forbids NUL in a field value (RFC 9110 5.5); the answer is refused as a whole, the try is recorded."""
    hostile.script = lambda request: Reply(headers={"X-Nul": "a\x00b"})
    mine, theirs = two_tenants(api, other_api, receiver, hostile)
    for n in range(3):
        publish(api, mine, n)
        publish(other_api, theirs, n)

    run_worker()

    assert Delivery.objects.filter(subscription__topic__name="mine", status="succeeded").count() == 3
    assert len(receiver.requests) == 3 and len(hostile.requests) == 3  # each sent once so far
    assert {r.headers["herald-attempt"] for r in receiver.requests + hostile.requests} == {"1"}
    stored = Attempt.objects.filter(delivery__subscription__topic__name="theirs")
    assert {(a.error_class, a.response_status, a.outcome) for a in stored} == {
        ("invalid_response", None, "retryable_failure")}
    assert all("not valid HTTP" in a.error_detail for a in stored)
    theirs_pending = Delivery.objects.filter(subscription__topic__name="theirs", status="pending", attempt_count=1)
    assert theirs_pending.count() == 3  # retried on their schedule, like any failure


@pytest.mark.django_db(transaction=True)
def test_huge_response_headers_are_stored_bounded(api, receiver, run_worker):
    receiver.script = [Reply(headers={f"X-Big-{n}": "v" * 60_000 for n in range(95)})]
    topic, _ = subscribe(api, receiver)
    publish(api, topic)

    run_worker()

    attempt = Attempt.objects.get()
    assert attempt.response_status == 200
    assert sum(len(k) + len(v) for k, v in attempt.response_headers.items()) < 8192 + 100
    assert attempt.response_headers[TRUNCATED_HEADER].endswith("not stored")
    detail = api.get(f"/api/deliveries/{attempt.delivery_id}/")
    assert len(detail.content) < 20_000


@pytest.mark.django_db(transaction=True)
def test_a_batch_that_cannot_be_recorded_together_is_recorded_row_by_row(three):
    claimed = leases.claim(three, timezone.now())
    assert len(claimed) == 3
    bad = claimed[1]
    tries = []
    for delivery in claimed:
        # Unsanitized on purpose: the database refuses a NUL, as it would anything the cleaning missed.
        headers = {"X-Nul": "a\x00b"} if delivery is bad else {"X-Fine": "yes"}
        result = SendResult(status=200, duration_ms=5, started_at=time.time(), headers=headers)
        tries.append(recording.Tried(delivery, subscription_policy(delivery.subscription),
                                     1, None, result, "deliveries"))

    recording.record(claimed, tries, {}, set())

    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}
    by_delivery = {a.delivery_id: a for a in Attempt.objects.all()}
    assert by_delivery[bad.id].error_class == "unrecordable" and by_delivery[bad.id].response_headers == {}
    assert by_delivery[bad.id].response_status == 200 and by_delivery[bad.id].outcome == "success"
    assert [by_delivery[d.id].response_headers for d in claimed if d is not bad] == [{"X-Fine": "yes"}] * 2


@pytest.mark.django_db(transaction=True)
def test_a_batch_requests_shared_answer_survives_the_row_by_row_recording(three):
    """Two deliveries answered by one request (a batch) share one stored exchange; when their group cannot be
    recorded together, each is written alone and the exchange is stored anew, not under the id the rolled-back
    group gave it."""
    claimed = leases.claim(three, timezone.now())
    request = OutgoingRequest(url="http://127.0.0.1:9/hook", body=b"[1,2]", headers={"Content-Type": "x"})
    tries = []
    for n, delivery in enumerate(claimed):
        bad = n == 2
        result = SendResult(status=200, duration_ms=5, started_at=time.time(),
                            headers={"X-Nul": "a\x00b"} if bad else {"X-Batch": "yes"}, body_excerpt="ok")
        tries.append(recording.Tried(delivery, subscription_policy(delivery.subscription), 1,
                                     None if bad else request, result, "deliveries"))

    recording.record(claimed, tries, {}, set())

    together = [Attempt.objects.get(delivery_id=d.id) for d in claimed[:2]]
    assert [a.error_class for a in together] == ["", ""]  # stored with the answer, not stripped
    assert together[0].exchange_id == together[1].exchange_id is not None
    assert Exchange.objects.get().response_headers == {"X-Batch": "yes"}
    assert Attempt.objects.get(delivery_id=claimed[2].id).error_class == "unrecordable"


@pytest.mark.django_db(transaction=True)
def test_a_job_that_raises_before_sending_settles_its_rows_at_once(three, monkeypatch):
    monkeypatch.setattr(attempts.sender, "submit", raising("something inside the job broke"))
    before = timezone.now()
    with pytest.raises(RuntimeError):
        attempts.process(three, "deliveries")

    for delivery in Delivery.objects.all():
        assert delivery.status == "pending" and delivery.lease_until is None
        assert delivery.attempt_count == 0
        assert before < delivery.next_attempt_at <= before + timedelta(seconds=attempts.RELEASE_DELAY_SECONDS + 2)
    assert Attempt.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_job_that_raises_after_sending_records_each_try_once(three, receiver, monkeypatch):
    monkeypatch.setattr(recording, "record_health", raising("health bookkeeping broke"))
    with pytest.raises(RuntimeError):
        attempts.process(three, "deliveries")

    assert set(Delivery.objects.values_list("status", "attempt_count")) == {("succeeded", 1)}
    assert Attempt.objects.count() == 3 and len(receiver.requests) == 3


@pytest.mark.django_db(transaction=True)
def test_a_row_whose_request_cannot_be_built_fails_alone_and_counts(three, monkeypatch):
    ids = three
    real = outgoing.envelope

    def fragile(delivery, policy):
        if delivery.id == ids[0]:
            raise ValueError("cannot build this one")
        return real(delivery, policy)

    monkeypatch.setattr(outgoing, "envelope", fragile)
    assert attempts.process(ids, "deliveries") == 2

    broken = Delivery.objects.get(id=ids[0])
    assert broken.status == "pending" and broken.attempt_count == 1 and broken.next_attempt_at > timezone.now()
    assert Attempt.objects.get(delivery=broken).error_class == "internal"
    assert Delivery.objects.filter(status="succeeded").count() == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fate", ["flushed", "failed", "taken_by_a_worker_that_died"])
def test_due_work_whose_pump_was_lost_is_sent_once_the_scheduler_asks_again(api, receiver, redis_conn, run_worker,
                                                                           fate):
    topic, _ = subscribe(api, receiver, FAST)
    publish(api, topic)
    [job_id] = Queue("deliveries", connection=redis_conn).job_ids  # the pump the publish asked for
    wanted = queues.PUMP_WANTED_KEY.format("deliveries")
    if fate == "flushed":
        redis_conn.flushall()
    else:
        job = Job.fetch(job_id, connection=redis_conn)
        Queue("deliveries", connection=redis_conn).remove(job)
        if fate == "failed":
            job.set_status(JobStatus.FAILED)
        # A waiting pump's flag lapses by itself; here its lapse is not waited for.
        assert 0 < redis_conn.ttl(wanted) <= queues.PUMP_WANTED_SECONDS
        redis_conn.delete(wanted)
    assert Delivery.objects.get().status == "pending"  # nothing in Redis names it: it is simply due

    assert dispatch.dispatch_due() == 1
    run_worker()

    assert Delivery.objects.get().status == "succeeded" and len(receiver.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_waiting_pump_is_not_queued_again(api, receiver, redis_conn):
    topic, _ = subscribe(api, receiver, FAST)
    publish(api, topic)

    assert dispatch.dispatch_due() == 1  # due, and a pump already waits for it
    assert queues.want_pump("deliveries") is False
    assert Queue("deliveries", connection=redis_conn).count == 1


@pytest.mark.django_db(transaction=True)
def test_an_expired_lease_counts_the_try_so_limits_end_it(api, receiver, redis_conn):
    topic, _ = subscribe(api, receiver, FAST)
    publish(api, topic)
    published = timezone.now()

    [first] = leases.claim([Delivery.objects.get().id], published)  # its worker then dies
    expired_at = first.lease_until + timedelta(seconds=1)
    assert dispatch.release_expired_leases(expired_at) == 1
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 1)
    assert delivery.next_attempt_at == expired_at + timedelta(seconds=5)  # the policy's first retry delay
    assert Attempt.objects.get().error_class == "lease_expired"

    [second] = leases.claim([delivery.id], delivery.next_attempt_at)  # its worker dies again
    assert dispatch.release_expired_leases(second.lease_until + timedelta(seconds=1)) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.dead_letter_reason, delivery.attempt_count) == (
        "dead_lettered", "max_attempts", 2)
    assert list(Attempt.objects.values_list("number", "error_class", "outcome")) == [
        (1, "lease_expired", "retryable_failure"), (2, "lease_expired", "retryable_failure")]


@pytest.mark.django_db(transaction=True)
def test_a_worker_recovers_when_its_database_connections_are_cut(api, receiver, processes):
    topic, _ = subscribe(api, receiver, FAST)
    processes.worker()
    processes.cron()
    publish(api, topic, 1)
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 1)

    with connection.cursor() as cursor:  # what a PostgreSQL restart or failover does to every other session
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    publish(api, topic, 2)

    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 2, timeout=15)
    assert sorted(r.json()["data"] for r in receiver.requests) == [1, 2]


@pytest.mark.django_db(transaction=True)
def test_a_worker_keeps_running_through_a_redis_restart_mid_job(api, receiver, processes):
    receiver.script = lambda request: Reply(delay=1.5 if len(receiver.requests) == 1 else 0)
    topic, _ = subscribe(api, receiver, FAST)
    publish(api, topic, 1)
    publish(api, topic, 2)
    first, second = Delivery.objects.order_by("id")
    port = localredis.free_port()
    data = tempfile.mkdtemp(prefix="herald-redis-")
    server = localredis.start(port, data)
    url = f"redis://127.0.0.1:{port}/0"
    queue = Queue("deliveries", connection=Redis.from_url(url))
    try:
        log = tempfile.NamedTemporaryFile("w+", suffix=".log")
        worker = processes.worker(output=log, REDIS_URL=url)
        queue.enqueue(jobs.deliver, [first.id], "deliveries")
        receiver.wait_for(1)  # the job is sending; Redis goes away and is still gone when the job ends
        server.send_signal(signal.SIGKILL)
        server.wait(5)
        said = lambda words: words in open(log.name).read() or worker.poll() is not None  # noqa: E731
        wait_until(lambda: said("waiting for Redis"), timeout=30)  # the job ended while Redis was gone
        server = localredis.start(port, data)
        wait_until(lambda: said("answers again"), timeout=30)
        assert worker.poll() is None, "the worker ended when Redis went away"
        wait_until(lambda: Delivery.objects.get(id=first.id).status == "succeeded")

        queue.enqueue(jobs.deliver, [second.id], "deliveries")  # the restarted Redis is empty: a new job
        wait_until(lambda: Delivery.objects.get(id=second.id).status == "succeeded", timeout=30)
    finally:
        server.terminate()
        server.wait(5)
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.django_db(transaction=True)
def test_a_row_held_while_its_endpoint_recovered_is_released_by_the_reconciler(three):
    # A worker read the endpoint as disabled and held the rows; meanwhile a probe elsewhere made it active again.
    Delivery.objects.update(**transitions.on_hold())
    assert Endpoint.objects.get().state == "active"
    now = timezone.now()

    assert dispatch.reconcile(now)["stranded_held"] == 3

    assert set(Delivery.objects.values_list("next_attempt_at", flat=True)) == {now}
    Endpoint.objects.update(state="frozen")
    Delivery.objects.update(**transitions.on_hold())
    assert dispatch.reconcile(now)["stranded_held"] == 0  # held for a reason: it stays held


@pytest.mark.django_db(transaction=True)
def test_sends_are_recorded_after_the_database_connection_is_cut_mid_job(three, receiver, monkeypatch):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        job_backend = cursor.fetchone()[0]
    killer = psycopg.connect(connection_string())
    real_submit = attempts.sender.submit

    def send_then_cut(request, **kwargs):  # what a PostgreSQL restart does to the job's session while it sends
        sent = real_submit(request, **kwargs)
        sent.result()
        killer.execute("SELECT pg_terminate_backend(%s)", [job_backend])
        return sent

    monkeypatch.setattr(attempts.sender, "submit", send_then_cut)
    try:
        attempts.process(three, "deliveries")  # the batch write fails; row by row it reconnects and records
    finally:
        killer.close()

    assert len(receiver.requests) == 3
    assert set(Delivery.objects.values_list("status", "attempt_count")) == {("succeeded", 1)}  # recorded, not resent
    assert Attempt.objects.count() == 3


def connection_string() -> str:
    db = connection.settings_dict
    return f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={db['NAME']}"


@pytest.mark.django_db(transaction=True)
def test_an_answer_journaled_before_its_worker_died_is_recorded_not_resent(three):
    now = timezone.now()
    answered, lost, *_ = leases.claim(three, now)  # the worker sends both; only the first was answered, then it dies
    ok = SendResult(status=200, duration_ms=7, started_at=now.timestamp(), headers={"X-Seen": "yes"})
    journal.remember(answered.id, answered.lease_until, 1, "deliveries", ok)
    journal.flush()

    later = answered.lease_until + timedelta(seconds=1)
    assert dispatch.release_expired_leases(later) == 3  # one from the journal, two counted as lost

    answered.refresh_from_db()
    assert (answered.status, answered.attempt_count) == ("succeeded", 1)
    [attempt] = Attempt.objects.filter(delivery=answered)
    assert (attempt.response_status, attempt.error_class, attempt.response_headers) == (200, "", {"X-Seen": "yes"})
    assert Attempt.objects.get(delivery=lost).error_class == "lease_expired"


@pytest.mark.django_db(transaction=True)
def test_a_batch_answer_is_journaled_once_and_forgotten_once_recorded(three, redis_conn):
    now = timezone.now()
    claimed = leases.claim(three, now)
    answer = SendResult(status=500, duration_ms=7, started_at=now.timestamp(), body_excerpt="x" * 4096)
    for delivery in claimed:  # one request carried all three: one result
        journal.remember(delivery.id, delivery.lease_until, 1, "deliveries", answer, same_as=claimed[0].id)
    journal.flush()
    sizes = sorted(len(value) for key in redis_conn.scan_iter("herald:answers:*")
                   for value in redis_conn.hvals(key))
    assert len(sizes) == 3 and sizes[1] < 400 < 4096 < sizes[2]  # the answer once, two pointers to it
    found = journal.answered(claimed)
    assert {delivery_id: entry[2].body_excerpt for delivery_id, entry in found.items()} == {
        delivery.id: "x" * 4096 for delivery in claimed}
    journal.forget([delivery.id for delivery in claimed])
    journal.flush()
    assert list(redis_conn.scan_iter("herald:answers:*")) == []  # a hash without fields is no key


@pytest.mark.django_db(transaction=True)
def test_a_journaled_answer_to_an_earlier_try_is_ignored(three):
    now = timezone.now()
    [first] = leases.claim(three[:1], now)
    ok = SendResult(status=200, duration_ms=7, started_at=now.timestamp())
    journal.remember(first.id, first.lease_until, 1, "deliveries", ok)
    journal.flush()
    Delivery.objects.filter(id=first.id).update(**transitions.deferred(now))  # that try was recorded otherwise
    [again] = leases.claim(three[:1], now + timedelta(seconds=1))  # the next try, under a new lease; its worker dies

    dispatch.release_expired_leases(again.lease_until + timedelta(seconds=1))

    assert Attempt.objects.get(delivery=again).error_class == "lease_expired"


@pytest.mark.django_db(transaction=True)
def test_every_answer_is_journaled_as_it_arrives(three, receiver, redis_conn, monkeypatch):
    monkeypatch.setattr(journal, "forget", lambda ids: None)  # keep what recording would delete afterwards
    attempts.process(three, "deliveries")
    journal.flush()

    assert sorted(int(field) for key in redis_conn.keys("herald:answers:*") for field in redis_conn.hkeys(key)) == three


@pytest.mark.django_db(transaction=True)
def test_while_answers_cannot_be_journaled_the_journal_says_so(monkeypatch):
    ok = SendResult(status=200, duration_ms=1, started_at=time.time())
    lease = timezone.now()
    monkeypatch.setattr(journal.redis_link, "connection", lambda *_: Redis(port=1, socket_connect_timeout=0.2))
    journal.remember(1, lease, 1, "deliveries", ok)
    journal.flush()
    assert not journal.writable()  # the pump now keeps only CAUTIOUS_IN_FLIGHT requests in flight

    monkeypatch.undo()
    journal.remember(1, lease, 1, "deliveries", ok)
    journal.flush()
    assert journal.writable()


def test_the_journal_keeps_each_answer_under_its_block_in_the_order_handed_over(redis_conn):
    """Answers of ids in two blocks, one answered, recorded and answered again (its next try) within one write:
    each block is one hash that expires by itself, and what is left is the last of each delivery's entries."""
    first, second = 5 * journal.BLOCK - 1, 5 * journal.BLOCK  # neighbours in two blocks
    old, new = timezone.now(), timezone.now() + timedelta(minutes=1)
    ok = SendResult(status=200, duration_ms=1, started_at=time.time())
    journal._write([(first, old, 1, "deliveries", ok, None), (second, old, 1, "deliveries", ok, None),
                    (journal.FORGET, [second]), (second, new, 2, "retries", ok, None)])

    assert sorted(key.decode() for key in redis_conn.scan_iter("herald:answers:*")) == [
        "herald:answers:4", "herald:answers:5"]
    assert all(0 < redis_conn.ttl(key) <= journal.KEEP_SECONDS for key in redis_conn.scan_iter("herald:answers:*"))
    entries = journal._read(redis_conn, [first, second, second + 1])
    assert (entries[first]["number"], entries[second]["number"], entries[second]["queue"]) == (1, 2, "retries")
    assert entries[second + 1] is None


@pytest.mark.django_db(transaction=True)
def test_an_answer_journaled_by_a_worker_of_the_previous_version_is_still_found(three, redis_conn):
    """During a rolling upgrade, an answer a worker of the previous version journaled (one key per delivery) is
    recorded by the new reconciler, not sent again."""
    now = timezone.now()
    [claimed] = leases.claim(three[:1], now)
    redis_conn.set(journal.OLD_KEY.format(claimed.id), json.dumps({
        "lease": claimed.lease_until.isoformat(), "number": 1, "queue": "deliveries", "status": 200,
        "duration_ms": 3, "started_at": now.timestamp(), "headers": {}, "body_excerpt": "ok", "error_class": "",
        "error_detail": ""}), ex=60)

    assert dispatch.release_expired_leases(claimed.lease_until + timedelta(seconds=1)) == 1
    claimed.refresh_from_db()
    assert (claimed.status, Attempt.objects.get(delivery=claimed).response_status) == ("succeeded", 200)

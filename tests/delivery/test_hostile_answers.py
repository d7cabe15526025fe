"""A receiver's answer fails only its own row (issue #54, STYLE §12): generated hostile answers (Unicode digits and
spaces in every header, NUL, invalid UTF-8, deep and huge JSON, many headers, truncated bodies) driven through the
real record path, the handshake path, the token path and the reconciler, beside a healthy tenant's rows. Every
healthy row is recorded, every hostile row is recorded as what it is, and nothing raises out of a loop."""

import json
import random
import socket
import threading
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.engine.accounts import confirmation
from delivery.engine.claiming import leases
from delivery.engine.scheduler import dispatch
from delivery.engine.sending import journal, oauth
from delivery.models import Attempt, Delivery
from delivery.rules.decisions import parse_retry_after
from delivery.transport.posting import SendResult
from subscriptions.models import Subscription, Topic
from tests.conftest import publish, subscribe
from tests.receiver import Reply

SEED = 54
# Characters that look like digits or spaces to one reader and not to another: superscripts, circled digits, other
# scripts' digits, fullwidth, no-break and ideographic spaces, and controls.
TRICKY = "²³¹①⑳٣۷߂४০੩૪୫௬౭೮൯๙໑༡၂႓០᠑₂⁵½ⅷ０９\u00a0\u2007\u3000\u200b\t\x00\x01\x7f\x85\ufeff"
STATUSES = [200, 201, 204, 301, 400, 429, 500, 502, 503, 504, 599]  # (410 freezes its endpoint: tested elsewhere)


def hostile_value(rng: random.Random) -> bytes:
    """A header value as a hostile receiver might write it: tricky characters around digits, dates, huge numbers,
    invalid UTF-8."""
    pick = rng.randrange(9)
    if pick == 8:  # digits to str.isdigit, not to float: "²", "①5"
        return "".join(rng.choice("²³¹①⑳₂⁵0123456789") for _ in range(rng.randint(1, 4))).encode("utf-8")
    if pick == 0:
        return "".join(rng.choice(TRICKY + "0123456789 ") for _ in range(rng.randint(1, 8))).encode("utf-8")
    if pick == 1:
        return b"\xff\xfe\xc3(" + str(rng.randint(0, 99)).encode()
    if pick == 2:
        return str(rng.choice([10**400, -5, 2**64, 0])).encode()[:500] if rng.random() < 0.5 else b"1e400"
    if pick == 3:
        return rng.choice([b"Wed, 31 Feb 99999 25:61:61 GMT", b"Mon, 01 Jan 0001 00:00:00 GMT", b"Fri, 31 Dec 9999 "
                           b"23:59:59 GMT", b"Sun, 06 Nov 1994 08:49:37 +9999", b"x, 1 y 2 z"])
    if pick == 4:
        return b"5\x00" + bytes([rng.randrange(1, 32)])
    if pick == 5:
        return b"9" * rng.randint(30, 4000)
    if pick == 6:
        return ("\u0660" * rng.randint(1, 5)).encode("utf-8")  # Arabic-Indic zeros
    return rng.choice([b"", b" ", b"\t5\t", b"+5", b"5.5", b"0x10", b"-0"])


def hostile_body(rng: random.Random) -> bytes:
    return rng.choice([
        b"[" * 4096, b"{\"a\":" * 3000, b'{"validationResponse": ' + b"[" * 5000, b"\xff\xfe\x00\x00" * 64,
        b'{"n": 1e400}', b"\x00" * 100, b'"\\ud800"', json.dumps({"k": "v" * 60000}).encode(), b"",
    ])


def hostile_answer(rng: random.Random) -> bytes:
    """A whole HTTP response, written as raw bytes (no library would write most of these)."""
    status = rng.choice(STATUSES)
    headers = [(b"Retry-After", hostile_value(rng))]
    for _ in range(rng.choice([0, 1, 3, 300])):  # sometimes hundreds of headers
        name = rng.choice([b"X-A", b"X-\xc2\xb2", b"Retry-After", b"Date", b"Content-Type", b"X-Nul"])
        headers.append((name, hostile_value(rng)))
    body = hostile_body(rng)
    length = len(body) + (rng.choice([0, 0, 100]))  # sometimes a body cut short of its Content-Length
    head = b"HTTP/1.1 %d Hostile\r\n" % status + b"".join(n + b": " + v + b"\r\n" for n, v in headers)
    return head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % length + body


class RawReceiver:
    """A receiver on 127.0.0.1 that reads a request and answers the next of `answers` as raw bytes, then closes."""

    def __init__(self, answers_: list[bytes]):
        self.answers, self.served = answers_, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def _serve(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(rest) < length:
                    rest += conn.recv(65536)
                answer = self.answers[self.served % len(self.answers)]
                self.served += 1
                conn.sendall(answer)
            except OSError:
                pass

    def close(self) -> None:
        self.running = False
        self.sock.close()


@pytest.fixture
def hostile_receiver():
    rng = random.Random(SEED)
    known = [b"HTTP/1.1 %d X\r\nRetry-After: %s\r\nContent-Length: 0\r\n\r\n" % (status, value.encode())
             for status in (429, 502, 503, 504) for value in ("²", "①", "5²", "\u0663")]  # the report's, and kin
    server = RawReceiver(known + [hostile_answer(rng) for _ in range(60 - len(known))])
    yield server
    server.close()


@pytest.mark.django_db(transaction=True)
def test_hostile_answers_fail_only_their_own_rows_through_the_real_record_path(api, other_api, receiver,
                                                                              hostile_receiver, run_worker):
    once = {"retrySchedule": {"delays": [3600]}, "retryLimits": {"maxAttempts": 2}, "requestPolicy": {
        "timeoutSeconds": 5}}
    healthy, _ = subscribe(api, receiver, once, name="healthy")
    hostile, _ = subscribe(other_api, hostile_receiver, once, name="hostile")
    for n in range(60):
        publish(other_api, hostile, n)
        if n % 3 == 0:
            publish(api, healthy, n)

    run_worker()

    mine = Delivery.objects.filter(subscription__topic__name="healthy")
    assert set(mine.values_list("status", "attempt_count")) == {("succeeded", 1)}
    assert len(receiver.requests) == 20
    theirs = Delivery.objects.filter(subscription__topic__name="hostile")
    assert theirs.count() == 60 and not theirs.filter(status__in=["in_flight", "pending"], attempt_count=0).exists()
    assert Attempt.objects.filter(delivery__in=theirs).count() == 60  # every hostile answer recorded, once
    assert not Delivery.objects.filter(status="in_flight").exists()


@pytest.mark.django_db(transaction=True)
def test_a_unicode_digit_retry_after_is_a_retry_on_the_policy_schedule(other_api, hostile_receiver, run_worker):
    hostile_receiver.answers = [b"HTTP/1.1 503 No\r\nRetry-After: \xc2\xb2\r\nContent-Length: 0\r\n\r\n"]
    topic, _ = subscribe(other_api, hostile_receiver, {"retrySchedule": {"delays": [30]}}, name="sup")
    publish(other_api, topic)
    before = timezone.now()

    run_worker()

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 1)
    waited = (delivery.next_attempt_at - before).total_seconds()
    assert 29 < waited < 40  # the policy's 30 s: the header was not a number
    assert Attempt.objects.get().response_headers["Retry-After"] == "²"


@pytest.mark.django_db(transaction=True)
def test_the_reconciler_releases_everyones_leases_beside_hostile_and_unreadable_journal_entries(three, redis_conn):
    now = timezone.now()
    claimed = leases.claim(three, now)
    hostile = SendResult(status=503, duration_ms=3, started_at=now.timestamp(), headers={"Retry-After": "²"},
                         body_excerpt="[" * 4096, error_class="http_status")
    journal.remember(claimed[0].id, claimed[0].lease_until, 1, "deliveries", hostile)
    journal.flush()
    key = journal.KEY.format(claimed[1].id // journal.BLOCK)
    garbage = {"lease": claimed[1].lease_until.isoformat(), "number": "①", "queue": [], "status": "200",
               "duration_ms": -1, "started_at": 1e400, "headers": [], "body_excerpt": 5, "error_class": None,
               "error_detail": {}}
    redis_conn.hset(key, claimed[1].id, json.dumps(garbage, allow_nan=True))

    later = max(d.lease_until for d in claimed) + timedelta(seconds=1)
    for _ in range(3):  # tick after tick: nothing is retried ahead of the leases
        dispatch.reconcile(later)

    statuses = {d.id: (d.status, d.attempt_count) for d in Delivery.objects.all()}
    assert statuses == {d.id: ("pending", 1) for d in claimed}  # each try counted once, none left in flight
    recorded = {a.delivery_id: a.error_class for a in Attempt.objects.all()}
    assert recorded == {claimed[0].id: "http_status", claimed[1].id: "lease_expired", claimed[2].id: "lease_expired"}
    journal.flush()
    assert redis_conn.hget(key, claimed[1].id) is None  # the unreadable entry was dropped, not kept for next tick


@pytest.mark.django_db(transaction=True)
def test_a_deep_json_handshake_answer_leaves_a_reason_and_the_pump_goes_on(api, other_api, receiver,
                                                                          hostile_receiver, run_worker, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    hostile_receiver.answers = [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n"
                                + b"[" * 4096]
    receiver.script = lambda request: Reply(body=json.dumps({"validationResponse": request.json()["data"]["token"]})
                                            .encode())
    healthy_topic = api.post("/api/topics/", {"name": "healthy"}, format="json").json()
    topic = other_api.post("/api/topics/", {"name": "deep"}, format="json").json()
    created = other_api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": hostile_receiver.url},
                             format="json")
    assert created.status_code == 201, created.content
    mine = api.post("/api/subscriptions/", {"topic": healthy_topic["id"], "endpoint": receiver.url}, format="json")

    run_worker()

    hostile = Subscription.objects.get(id=created.json()["id"])
    assert hostile.status == "pending_confirmation"
    assert "without validationResponse" in hostile.handshake_problem
    assert len(receiver.requests) == 1 and Subscription.objects.get(id=mine.json()["id"]).status == "confirmed"


hostile_text = st.one_of(st.text(alphabet=st.sampled_from(TRICKY + "0123456789 -.e:,GMTWed"), max_size=40),
                         st.text(max_size=40), st.sampled_from(["[" * 4096, "{" * 3000, "1e400", "9" * 5000]))


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_retry_after_is_a_bounded_number_or_none_whatever_it_says(value):
    seconds = parse_retry_after(value, timezone.now())
    assert seconds is None or 0 <= seconds <= 3600


@settings(max_examples=300, deadline=None)
@given(st.one_of(hostile_text, st.binary(max_size=200)), st.sampled_from([200, 204, 500, None]))
def test_handshake_and_token_readers_answer_or_refuse_whatever_came_back(body, status):
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    for excerpt in (text, json.dumps({"validationResponse": text}), json.dumps({"access_token": "t",
                                                                               "expires_in": text})):
        result = SendResult(status=status, duration_ms=1, body_excerpt=excerpt, error_class="" if status else "dns")
        assert isinstance(confirmation.handshake_problem(result, "token"), str)
        try:
            token, lifetime = oauth.parse(result)
        except oauth.TokenError:
            continue
        assert token and 0 <= lifetime <= oauth.MAX_LIFETIME


@pytest.mark.django_db(transaction=True)
def test_a_stored_policy_that_no_longer_merges_fails_no_other_owners_claim(api, other_api, receiver, run_worker):
    """Its topic or the default changed since (or SQL wrote it): the default decides for that subscription alone."""
    healthy, _ = subscribe(api, receiver, name="healthy")
    broken, theirs = subscribe(other_api, receiver, name="broken")
    Subscription.objects.filter(id=theirs["id"]).update(delivery_policy={"retryLimits": {}})
    Topic.objects.filter(id=broken["id"]).update(delivery_policy={"preset": "event-grid"})
    publish(api, healthy)
    publish(other_api, broken)

    run_worker()

    assert Delivery.objects.get(subscription__topic__name="healthy").status == "succeeded"
    failed = Attempt.objects.get(delivery__subscription_id=theirs["id"])  # its own row says why, and is retried
    assert failed.error_class == "internal" and "retrySchedule needs maxAttempts" in failed.error_detail

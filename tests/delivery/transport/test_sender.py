"""The sender against real local servers: it returns values, never raises, never follows redirects."""

import socket
import threading
import time
from collections import Counter

import pytest

from delivery.rules.wire import OutgoingRequest
from delivery.transport.posting import EXCERPT_BYTES
from delivery.transport.sender import Transport, send
from tests.conftest import wait_until
from tests.receiver import Reply


def post(url, timeout=2.0):
    return send(OutgoingRequest(url=url, body=b"{}", headers={"Content-Type": "application/json"}), timeout=timeout)


def test_success_records_status_headers_and_excerpt(receiver):
    receiver.script = [Reply(status=204, body=b"", headers={"X-Seen": "yes"})]
    result = post(receiver.url)
    assert result.ok and result.status == 204 and result.error_class == ""
    assert result.headers["X-Seen"] == "yes"


def test_http_error_is_a_value(receiver):
    receiver.script = [Reply(status=503, body=b"busy", headers={"Retry-After": "7"})]
    result = post(receiver.url)
    assert (result.ok, result.status, result.error_class, result.body_excerpt) == (False, 503, "http_status", "busy")
    assert result.headers["Retry-After"] == "7"


def test_redirects_are_not_followed(receiver):
    receiver.script = [Reply(status=302, headers={"Location": receiver.url + "/elsewhere"})]
    result = post(receiver.url)
    assert (result.status, result.error_class) == (302, "redirect")
    assert len(receiver.requests) == 1


def test_timeout_is_a_value(receiver):
    receiver.script = [Reply(delay=3)]
    result = post(receiver.url, timeout=1)
    assert (result.status, result.error_class) == (None, "timeout")
    assert result.duration_ms >= 900  # cut off at the timeout: the answer was due only after 3 s


def test_connection_refused_is_a_value():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: the connection is refused
        result = post(f"http://127.0.0.1:{port}/")
    assert (result.status, result.error_class) == (None, "connection")


def test_unresolvable_host_is_a_dns_error():
    result = post("http://no-such-host.invalid/")
    assert (result.status, result.error_class) == (None, "dns")


def test_body_excerpt_is_capped(receiver):
    receiver.script = [Reply(status=500, body=b"x" * 20000)]
    assert len(post(receiver.url).body_excerpt) == EXCERPT_BYTES


@pytest.fixture
def dripping_server():
    """A raw server that answers a byte at a time, each well within a read timeout, never finishing in time."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()
    mode = {"what": "headers"}

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                head = b"HTTP/1.1 200 OK\r\n"
                if mode["what"] == "body":
                    head += b"Content-Length: 100\r\n\r\n"
                    conn.sendall(head)
                    trickle = b"x" * 100
                else:
                    trickle = b"X-Slow: " + b"y" * 100
                    conn.sendall(head)
                for byte in trickle:
                    if stop.wait(0.3):
                        return
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", mode
    stop.set()
    listener.close()


@pytest.mark.parametrize("what", ["headers", "body"])
def test_a_dripping_answer_is_cut_off_at_the_timeout(dripping_server, what):
    url, mode = dripping_server
    mode["what"] = what
    started = time.monotonic()
    result = post(url, timeout=1)
    took = time.monotonic() - started
    assert (result.status, result.error_class) == (None, "timeout"), result
    assert took >= 1.0, took
    assert "within 1 s" in result.error_detail


@pytest.fixture
def silent():
    """A server on 127.0.0.1 that accepts connections and never answers: (its URL, and it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    server.close()


def test_a_send_unanswered_past_the_stall_bound_gives_its_slot_back_but_keeps_its_endpoints(receiver, silent):
    """Send slots in shares: four sends to an endpoint that accepts and never answers hold the transport's four
    slots only until they stall; then a fresh send to another endpoint goes out at once, while the silent endpoint
    still has its four in flight (its room) and its sends end by their own deadline."""
    transport = Transport(max_in_flight=4, per_endpoint=4, stalled_after=0.2)
    try:
        url = silent
        waiting = [transport.submit(OutgoingRequest(url=url, headers={}, body=b"{}"), timeout=30, key="silent",
                                    share=(1, 5)) for _ in range(4)]
        assert transport.active_by_share() == Counter({(1, 5): 4})
        wait_until(lambda: transport.active == 0, timeout=10)
        assert transport.pending == 4 and not any(future.done() for future in waiting)
        fresh = transport.submit(OutgoingRequest(url=receiver.url, headers={}, body=b"{}"), timeout=5, key="other",
                                 share=(1, 6))
        assert fresh.result(timeout=10).status == 200
        assert not any(future.done() for future in waiting)
    finally:
        transport.close()


def test_past_the_process_bound_a_send_that_stalls_is_cut_short_and_no_slot_stays_taken(silent):
    """A bound on open connections whatever number of endpoints stop answering: past STALLED_PER_SLOT stalled
    sends per slot, a send of the share holding the most that stalls is ended by Herald (`cut_short`, not the
    endpoint's failure) instead of keeping its slot, so a fresh delivery still finds one."""
    transport = Transport(max_in_flight=2, per_endpoint=4, stalled_after=0.05)
    try:
        url = silent
        futures = [transport.submit(OutgoingRequest(url=f"{url}/{n % 3}", headers={}, body=b"{}"), timeout=30,
                                    key=f"silent-{n % 3}", share=(1, 5)) for n in range(12)]
        assert transport.max_stalled == 8
        cut = wait_until(lambda: [f.result() for f in futures if f.done()] if sum(f.done() for f in futures) == 4
                         else None, timeout=10)
        assert {(r.status, r.error_class) for r in cut} == {(None, "cut_short")}
        assert all("ended by Herald" in r.error_detail for r in cut)
        assert len(transport.stalled_sends) == 8 and transport.active == 0 and transport.pending == 8
        assert transport.stalls == 8
    finally:
        transport.close()


def test_past_the_bound_the_share_holding_the_most_loses_a_stalled_send_never_one_within_its_part(silent):
    """Stalled sends in shares: share A's silent endpoints fill the process's bound; B's send to a slow endpoint
    stalls too. B holds less than its part, so A's oldest stalled send is ended to make room, not B's."""
    transport = Transport(max_in_flight=2, per_endpoint=8, stalled_after=0.05)
    try:
        a_sends = [transport.submit(OutgoingRequest(url=f"{silent}/a{n}", headers={}, body=b"{}"), timeout=30,
                                    key=f"a-{n % 4}", share=(1, 0)) for n in range(8)]
        wait_until(lambda: len(transport.stalled_sends) == 8, timeout=10)
        b_send = transport.submit(OutgoingRequest(url=f"{silent}/b", headers={}, body=b"{}"), timeout=30, key="b",
                                  share=(2, 0))
        ended = wait_until(lambda: [f for f in a_sends if f.done()], timeout=10)
        assert [f.result().error_class for f in ended] == ["cut_short"] and ended[0] is a_sends[0]  # A's oldest
        wait_until(lambda: transport.stalled_sends.counts == Counter({(1, 0): 7, (2, 0): 1}), timeout=10)
        assert not b_send.done()
    finally:
        transport.close()

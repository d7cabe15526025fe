"""Name lookups hold no thread others share (issue #54): one share's slow name server leaves another share's sends
to names as they were; a lookup has a deadline; answers are kept a while; one name is looked up once at a time.

The system resolver is replaced, in this module's tests only, by one that blocks on the names of `.slow.test`
until the test lets it go and answers 127.0.0.1 at once for `.quiet.test` (what a slow and a healthy name server
would do); everything else goes to the real resolver."""

import socket
import threading

import pytest

from delivery.rules.wire import OutgoingRequest
from delivery.transport.lookups import Lookups
from delivery.transport.sender import Transport

REAL_GETADDRINFO = socket.getaddrinfo


class NameServers:
    def __init__(self):
        self.release = threading.Event()
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def getaddrinfo(self, host, port, *args, **kwargs):
        if isinstance(host, str) and host.endswith((".slow.test", ".quiet.test")):
            with self.lock:
                self.asked.append(host)
            if host.endswith(".slow.test"):
                self.release.wait(60)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return REAL_GETADDRINFO(host, port, *args, **kwargs)


@pytest.fixture
def names(monkeypatch):
    servers = NameServers()
    monkeypatch.setattr(socket, "getaddrinfo", servers.getaddrinfo)
    yield servers
    servers.release.set()


def request_to(host: str, port: int) -> OutgoingRequest:
    return OutgoingRequest(url=f"http://{host}:{port}/hook", body=b"{}")


def test_one_shares_slow_names_leave_another_shares_sends_to_names_as_they_were(receiver, names, settings):
    settings.HERALD_DNS_TIMEOUT_SECONDS = 30
    port = int(receiver.url.split(":")[2].split("/")[0])
    transport = Transport(max_in_flight=512, per_endpoint=4)
    try:
        slow = [transport.submit(request_to(f"n{i}.slow.test", port), timeout=40, key=i, share=(1, 0))
                for i in range(40)]
        quiet = [transport.submit(request_to(f"n{i}.quiet.test", port), timeout=40, key=100 + i, share=(2, 0))
                 for i in range(10)]

        answered = [future.result(timeout=20) for future in quiet]  # while every slow lookup still hangs

        assert [result.status for result in answered] == [200] * 10
        assert not any(future.done() for future in slow)
        assert len([host for host in names.asked if host.endswith(".slow.test")]) < 8  # its part of the threads
        names.release.set()
        assert {future.result(timeout=30).status for future in slow} == {200}  # none lost, each sent once released
    finally:
        names.release.set()
        transport.close()


def test_a_lookup_past_its_deadline_is_a_dns_failure_of_that_send(receiver, names, settings):
    settings.HERALD_DNS_TIMEOUT_SECONDS = 0.2
    port = int(receiver.url.split(":")[2].split("/")[0])
    transport = Transport(max_in_flight=8, per_endpoint=4)
    try:
        result = transport.submit(request_to("late.slow.test", port), timeout=10).result(timeout=10)
        assert (result.status, result.error_class) == (None, "dns")
        assert "did not resolve within 0.2 s" in result.error_detail
    finally:
        names.release.set()
        transport.close()


def test_an_answer_is_kept_and_one_name_is_looked_up_once_at_a_time(receiver, names):
    port = int(receiver.url.split(":")[2].split("/")[0])
    transport = Transport(max_in_flight=64, per_endpoint=64,
                          lookups=Lookups(threads=4, timeout=5, cache_seconds=30))
    try:
        futures = [transport.submit(request_to("same.quiet.test", port), timeout=10) for _ in range(20)]
        assert {future.result(timeout=10).status for future in futures} == {200}
        assert transport.submit(request_to("same.quiet.test", port), timeout=10).result(timeout=10).status == 200
        assert names.asked == ["same.quiet.test"]
    finally:
        transport.close()


def test_a_name_that_does_not_resolve_is_asked_again_next_time(names):
    lookups = Lookups(threads=2, timeout=5, cache_seconds=30,
                      resolver=lambda host, port: REAL_GETADDRINFO("does-not-exist.invalid", port))
    transport = Transport(max_in_flight=4, per_endpoint=4, lookups=lookups)
    try:
        for _ in range(2):
            result = transport.submit(request_to("nowhere.invalid", 80), timeout=5).result(timeout=10)
            assert result.error_class == "dns"
        assert lookups.cache == {}
    finally:
        transport.close()


def test_a_share_with_a_lookup_running_leaves_the_reserve_to_shares_with_none():
    lookups = Lookups(threads=8, timeout=5, cache_seconds=30)
    try:
        lookups.busy.update({(1, 0): 6, (1, 7): 1})  # two slow shares hold 7 of the 8 threads
        assert not lookups._room_for((1, 7))  # the last thread is the reserve
        assert not lookups._room_for((1, 0))
        assert lookups._room_for((2, 0))  # a share with nothing running takes it
    finally:
        lookups.close()


def test_one_owners_tenants_together_leave_the_reserve_to_another_owner():
    lookups = Lookups(threads=8, timeout=5, cache_seconds=30)
    try:
        lookups.busy.update({(1, tenant): 1 for tenant in range(1, 8)})  # seven tenants of one owner, one each
        assert not lookups._room_for((1, 8))  # an eighth tenant of the same owner: the last thread is the reserve
        assert lookups._room_for((2, 0))  # another owner's first lookup takes it
    finally:
        lookups.close()

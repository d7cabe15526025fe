"""Sends handed over between a process's pumps (engine/sending/handover.py): recorded by the pump that takes them,
or by the process's recorder; what the database cannot take now is left for later. (A pump handing over through a
real drain: tests/delivery/engine/sending/test_pump.py.)"""

from concurrent.futures import Future

from django.db import OperationalError
from django.utils import timezone

from delivery.engine.sending import handover
from delivery.transport.posting import SendResult

CLOCK = timezone.now()


def test_what_the_recorder_cannot_record_for_the_database_is_left_again_and_nothing_else_holds_it(monkeypatch):
    """`record_left`: sends the database could not take (it is away) are handed over again, to be tried later;
    any other failure is logged and left to the reconciler, so one bad row cannot hold back the others."""
    transport, future = object(), Future()
    future.set_result(SendResult(status=200, duration_ms=3))
    sending = type("Sending", (), {"delivery": type("Row", (), {"id": 7, "endpoint_id": 1})()})()
    monkeypatch.setattr(handover.time, "sleep", lambda seconds: None)
    quiet = handover.HandedOver()
    quiet.closing.set()  # no recorder thread: what is left stays for this test to see
    monkeypatch.setattr(handover, "handed_over", quiet)

    def away(*args):
        raise OperationalError("the database is away")

    monkeypatch.setattr(handover.attempts, "record_sends", away)
    assert not handover.record_left(transport, ({future: sending}, {7}, {}), lambda: CLOCK)
    assert handover.handed_over.take(transport) == ({future: sending}, {7}, {})

    def broken(*args):
        raise ValueError("a row nothing can store")

    monkeypatch.setattr(handover.attempts, "record_sends", broken)
    assert handover.record_left(transport, ({future: sending}, {7}, {}), lambda: CLOCK)  # logged, not left again
    assert handover.handed_over.take(transport) == ({}, set(), {})



def sending(delivery_id: int):
    return type("Sending", (), {"delivery": type("Row", (), {"id": delivery_id, "endpoint_id": 1})()})()


def test_what_is_left_is_taken_once_and_only_what_completed_when_asked_so():
    registry = handover.HandedOver()
    registry.closing.set()  # no recorder thread
    transport, done, waiting = object(), Future(), Future()
    done.set_result(SendResult(status=200, duration_ms=3))
    first, second = sending(1), sending(2)
    registry.leave(transport, {done: first, waiting: second}, {1, 2}, {})
    assert registry.transports() == [transport] and set(registry.in_flight()) == {done, waiting}
    assert registry.take(transport, done_only=True) == ({done: first}, {1}, {})
    assert registry.take(transport) == ({waiting: second}, {2}, {})
    assert registry.take(transport) == ({}, set(), {}) and registry.transports() == []

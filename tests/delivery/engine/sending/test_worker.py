"""The worker's companions (engine/sending/worker.py): started together as a worker begins, stopped together as it
ends, the transport closed and the next worker given a new one. (The worker's waits for PostgreSQL and Redis and its
restarts: tests/test_dependency_outages.py.)"""

import pytest

from delivery.engine.plumbing import counters
from delivery.engine.sending import handover, journal
from delivery.engine.sending.worker import Companions
from delivery.transport import sender

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_companions_start_and_stop_together(redis_conn):
    companions = Companions().start("test-worker")
    try:
        assert companions.transport is sender.transport() and companions.transport.thread.is_alive()
        assert journal._writer is not None and journal._writer.is_alive()
        assert handover.handed_over.recorder is not None and handover.handed_over.recorder.is_alive()
        assert counters._state["buffering"] and companions.beat is not None
    finally:
        companions.stop()
    assert not companions.transport.thread.is_alive()  # closed: its loop ended
    assert companions.beat.stopped.is_set()
    fresh = sender.transport()
    assert fresh is not companions.transport and fresh.thread.is_alive()


def test_a_journal_that_cannot_write_does_not_hold_a_stopping_worker(monkeypatch):
    class Stuck:
        unfinished_tasks = 3

    monkeypatch.setattr(journal, "_pending", Stuck())
    assert journal.flush(timeout=0.05) is False

"""The claim's tests: each starts its turns afresh (engine/claiming/due_work.py keeps fairness cursors per process)."""

import pytest

from delivery.engine.claiming import due_work


@pytest.fixture(autouse=True)
def fresh_cursors(monkeypatch):
    """Each test's claims start their turns afresh, whatever an earlier test's claims left in this process."""
    monkeypatch.setattr(due_work, "CURSORS", due_work.Cursors())

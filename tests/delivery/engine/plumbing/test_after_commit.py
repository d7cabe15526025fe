"""After a commit (engine/plumbing/after_commit.py): nothing for a rollback, and an action that fails is logged
while the ones queued after it still run, outside a transaction as inside one."""

import logging

import pytest
from django.db import transaction

from delivery.engine.plumbing.after_commit import after_commit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failing_action_is_logged_and_the_next_still_runs(caplog):
    ran = []

    def fails(n):
        raise RuntimeError(f"receiver {n} broke")

    with caplog.at_level(logging.ERROR), transaction.atomic():
        after_commit(fails, 1)
        after_commit(ran.append, "second")
        assert ran == []  # not before the commit
    assert ran == ["second"]
    assert "after a commit, test_a_failing_action_is_logged_and_the_next_still_runs.<locals>.fails failed" in \
        caplog.text and "receiver 1 broke" in caplog.text


def test_nothing_runs_for_a_rollback_and_at_once_outside_a_transaction():
    ran = []
    with pytest.raises(ValueError), transaction.atomic():
        after_commit(ran.append, "rolled back")
        raise ValueError
    after_commit(ran.append, "at once")
    assert ran == ["at once"]

"""After the caller's commit: the one way Herald waits for a transaction before it acts outside it (asks for a
pump, wakes the scheduler, queues a job, sends a signal).

Nothing runs for a change that rolled back, and outside a transaction the action runs at once. An action that fails
is logged, never raised into the code whose transaction committed, and the actions queued after it still run: what
it asks for is also found later (the scheduler asks for pumps for due rows, the reconciler finds lost leases and
fan-outs), and a receiver of a signal cannot undo a commit."""

import logging

from django.db import transaction

log = logging.getLogger(__name__)


def after_commit(action, *args, **kwargs) -> None:
    """Run `action(*args, **kwargs)` once the caller's transaction commits."""
    def run():
        try:
            action(*args, **kwargs)
        except Exception:
            log.exception("after a commit, %s failed", getattr(action, "__qualname__", repr(action)))
    transaction.on_commit(run)

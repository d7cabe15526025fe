"""After the caller's commit: the one way Herald waits for a transaction before it acts outside it (asks for a
pump, wakes the scheduler, queues a job, sends a signal).

Nothing runs for a change that rolled back, and outside a transaction the action runs at once. An action that fails
is logged, never raised into the code whose transaction committed: what it asks for is also found later (the
scheduler asks for pumps for due rows, the reconciler finds lost leases and fan-outs), and a receiver of a signal
cannot undo a commit."""

from functools import partial

from django.db import transaction


def after_commit(action, *args, **kwargs) -> None:
    """Run `action(*args, **kwargs)` once the caller's transaction commits."""
    transaction.on_commit(partial(action, *args, **kwargs), robust=True)

"""The scheduler's ticks (`manage.py herald_cron`): what runs on time rather than on a publish.

    dispatch   due retries and probes, lost leases, handshakes, large fan-outs: the reconciler
    retention  deleting finished messages past their retention

May use: sending, intake, claiming, accounts, state, plumbing.
"""

"""Process plumbing: what every other wing stands on, and nothing of webhooks.

    clock         `now` for everything that compares times (tests pass it in)
    errors        ApplicationError: a refusal with its field and status, raised by services, shaped by the edges
    redis_link    the one Redis connection (and its retries)
    availability  waiting for PostgreSQL and Redis, at start-up as later; a process exits only when asked
    queues        asking for pumps and deliver jobs on RQ's queues (by name: the jobs import from above), and
                  waking the scheduler after a commit
    database      acting once the caller's transaction commits (robust: a failure is logged); bound cursors and
                  array parameters for the hot paths
    counters      the operators' figures, tallied per process and added to Redis once a second
    tracing       OpenTelemetry, when it is installed and asked for: the spans (tracing.py), turned on once per
                  process (tracing_setup.py)

May use: delivery.rules, delivery.transport, the models. Imports no other wing.
"""

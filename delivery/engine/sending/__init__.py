"""The send path: a worker's pump claims due deliveries, sends them through the transport, and records each
attempt and what it decides.

    worker     the RQ worker class: waits for its dependencies, runs pumps
    jobs       the RQ jobs (thin: ids in, state re-read)
    pump       the loop: claim, send, record, until nothing is due (its pace: rules/pump_pace.py)
    handover   what a pump had in flight when its time was up, for the next pump (or the recorder) to record
    attempts   one round of attempts: send, then write back under the lease
    outgoing   the request each delivery sends (headers, body, credentials)
    recording  attempt rows, outcomes and the next due time
    journal    answers kept in Redis the moment they arrive, until PostgreSQL has them recorded
    oauth      client-credentials tokens for endpoints that need them

May use: claiming, accounts (the handshake's request), state, plumbing.
"""

"""The send path: a worker's pump claims due deliveries, sends them through the transport, and records each
attempt and what it decides.

    worker     the RQ worker class: waits for its dependencies, runs pumps
    jobs       the RQ jobs (thin: ids in, state re-read)
    pump       the loop: claim, send, record, until nothing is due
    attempts   one round of attempts: send, then write back under the lease
    outgoing   the request each delivery sends (headers, body, credentials)
    recording  attempt rows, outcomes and the next due time
    journal    answers kept in Redis the moment they arrive, until PostgreSQL has them recorded
    throttle   an endpoint's rate limit (SNS's maxReceivesPerSecond)
    oauth      client-credentials tokens for endpoints that need them

May use: claiming, accounts (the handshake's request), state, plumbing.
"""

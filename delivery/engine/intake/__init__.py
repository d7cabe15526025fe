"""What goes in: a publish becomes a message and, by fan-out, one delivery per matching subscription; a replay
sends past messages again.

    publishing   publish and publish-batch: strict input, idempotency, the catalog's check, the tenant's audience
    fanout       a message's deliveries (inline, or by a job for large fan-outs) and why each subscription got one
    replay       sending past messages of a subscription again
    trial_events  test events: one to one subscription alone, asked for by hand
    operational  Herald's own events, published to a topic of the operator's

May use: accounts, state, plumbing.
"""

"""The state of a delivery and of its endpoint: the one door every status change goes through.

    lifecycle    the named states and each change with the follow-ups it owes (ordering, signals, pumps)
    transitions  the field changes of each transition, as data
    ordering     ordered delivery: the next message of an ordering key waits for the previous one
    announce     signals (delivery/signals.py) sent once the change commits
    effective    the delivery policy that applies to a subscription (its own, its topic's, the default)
    health       endpoint health: disable, freeze, enable, and the circuit's record of failures

May use: plumbing.
"""

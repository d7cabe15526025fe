"""What is due and who holds it: the claim of due deliveries, fair across owners, tenants and endpoints, and the
lease under which a claimed delivery is attempted and written back.

    due_work    the claim's reads: due rows in rooms per owner, tenant and endpoint, in the turns and parts of
                rules/claim_turns.py and rules/send_shares.py
    read_plans  how those reads are planned: in their index's order, whatever the statistics
    leases      claim under a lease, write back under it, give back what a crash left behind
    throttle    when a claimed row may go: its subscription's rate limit (SNS's maxReceivesPerSecond)

May use: state, plumbing.
"""

"""What owners and tenants ask for: subscriptions and their confirmation, tenants and their portal links, the
event type catalog, pausing and recovering. Every door (API, admin, portal, Python) calls these services, so each
rule and quota holds on every path.

    subscribing   topics and subscriptions: create, update (rules checked here)
    signing_secrets  a subscription's secret: made or checked, rotated with a grace period
    confirmation  the confirmation handshake: its token, its request, confirming
    recovery      dead letters and recovery: redrive, recover, retry now, pause, resume
    tenancy       tenants, their keys and portal links, and what a tenant's request may reach
    removal       deleting a subscription or a topic (a tenant too locks this way): a 409 while sending
    catalog       the catalog's checks at publish time (schemas compiled once per process, metered)
    event_types   the catalog's entries: create, update, delete
    quotas        what one owner or tenant may take of what all share: the one home of every quota

May use: state, plumbing.
"""

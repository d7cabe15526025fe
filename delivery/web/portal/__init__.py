"""The tenant portal: server-rendered pages a tenant opens from a portal link (docs/tenants.md).

`access.py` checks the signed link and sets the portal's headers on every answer (`portal_page`, around each view),
`pages.py` holds the views, and `actions.py` the one table of what the buttons on a subscription's page do: the
service each calls and the words shown once it is done. The portal reads through `web/selectors.py` and writes
through the engine's services, the ones the API calls: what a tenant may do here is what its key may do there.
"""

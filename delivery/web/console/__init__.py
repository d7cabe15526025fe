"""The operator console: the admin pages by resource (`subscriptions.py` for topics and subscriptions,
`endpoints.py`, `deliveries.py` for messages, deliveries and attempts), their buttons, and the dashboard."""

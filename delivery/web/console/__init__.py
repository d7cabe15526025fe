"""The operator console: one module per resource's admin pages (`topics.py`, `subscriptions.py`, `endpoints.py`,
`deliveries.py` for messages, deliveries and attempts, `tenants.py` with their keys, `event_types.py`,
`portal_settings.py`), the dashboard (`dashboard.py`), and what several pages share: `buttons.py` (an object's
buttons), `actions.py` (the lists' actions), `badges.py` (states at a glance), `schedules.py` (a policy's schedule),
`service_forms.py` (writes through the services) and `deletes.py` (deletes through them)."""

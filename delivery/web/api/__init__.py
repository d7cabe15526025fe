"""The REST API, by resource: each resource's module holds its views and their shapes (serializers): `topics.py`,
`publishing.py` (publish and publish-batch, actions of the topics' routes), `subscriptions/` (`views.py`,
`shapes.py`), `endpoints.py`, `messages.py`, `deliveries.py`, `policy_preview.py`, `signing_keys.py`, `tenants.py`,
`event_types.py`, `portal_settings.py`; and what every API view shares (base, authentication, parsers, errors,
pagination, filters, throttling, strict input, ownership, oversized bodies, the schema pages)."""

"""The REST API, by resource: `subscriptions.py` (topics, subscriptions, endpoints, publishing), `messages.py`
(messages, deliveries, the policy preview, signing keys), their serializers, and what every API view shares (base,
authentication, parsers, errors, pagination, filters, throttling, strict input, ownership, the schema pages)."""

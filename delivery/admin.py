"""The admin console's pages live in delivery/web/console/; importing them here registers them (Django looks for
`<app>.admin`)."""

from delivery.web.console import dashboard, deliveries, endpoints, subscriptions, tenants  # noqa: F401

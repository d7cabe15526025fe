"""The admin console's pages live in delivery/web/; importing them here registers them (Django looks for
`<app>.admin`)."""

from delivery.web import admin, endpoint_admin, subscription_admin  # noqa: F401

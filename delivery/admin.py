"""The admin console's pages live in delivery/web/console/; importing them here registers them (Django looks for
`<app>.admin`)."""

from delivery.web.console import (  # noqa: F401 (each module registers its pages)
    dashboard,
    deliveries,
    endpoints,
    event_types,
    portal_settings,
    subscriptions,
    tenants,
    topics,
)

"""How the console shows a state at a glance: an endpoint's health and a delivery's status as coloured badges, and
an endpoint as other pages link to it (the deliveries' and subscriptions' pages, the endpoints' list)."""

from django.urls import reverse
from django.utils.html import format_html

from subscriptions.states import EndpointState

STATE_COLOURS = {EndpointState.ACTIVE: "#2e7d32", EndpointState.DISABLED: "#ef6c00",
                 EndpointState.FROZEN: "#1565c0"}
STATUS_COLOURS = {"succeeded": "#2e7d32", "pending": "#ef6c00", "in_flight": "#0277bd",
                  "dead_lettered": "#c62828", "dropped": "#555"}


def state_badge(state: str):
    return format_html('<span class="herald-badge" style="background:{};color:#fff;padding:2px 8px;'
                       'border-radius:10px;font-weight:600">{}</span>', STATE_COLOURS.get(state, "#555"), state)


def status_badge(status: str):
    return format_html('<span class="herald-badge" style="background:{};color:#fff;padding:2px 8px;border-radius:10px;'
                       'font-weight:600">{}</span>', STATUS_COLOURS.get(status, "#555"), status)


def endpoint_link(endpoint):
    """An endpoint as the admin shows it elsewhere: a link to its page and its state."""
    return format_html('<a href="{}">{}</a> {}', reverse("admin:herald_subscriptions_endpoint_change",
                                                         args=[endpoint.id]), endpoint.url, state_badge(endpoint.state))

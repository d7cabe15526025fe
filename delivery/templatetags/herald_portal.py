"""The portal's template filters: stored states in a customer's words (rules/portal_words.py), headers as text."""

from django import template

from delivery.rules import portal_words

register = template.Library()


@register.filter
def delivery_words(delivery) -> str:
    return portal_words.delivery_status(delivery.status, delivery.attempt_count)


@register.filter
def reason_words(reason: str) -> str:
    return portal_words.why_failed(reason)


@register.filter
def subscription_words(status: str) -> str:
    return portal_words.subscription_status(status)


@register.filter
def endpoint_words(state: str) -> str:
    return portal_words.endpoint_state(state)


@register.filter
def attempt_words(outcome: str) -> str:
    return portal_words.attempt_outcome(outcome)


@register.filter
def error_class_words(error_class: str) -> str:
    return portal_words.error(error_class)


@register.filter
def header_lines(headers) -> str:
    """Recorded headers as an HTTP message shows them, one `Name: value` a line."""
    if not isinstance(headers, dict):
        return ""
    return "\n".join(f"{name}: {value}" for name, value in headers.items())

"""The portal's template filters: stored states in a customer's words (rules/portal_words.py), headers as text."""

from django import template

from delivery.rules import portal_words

register = template.Library()


@register.filter
def delivery_words(delivery) -> str:
    return portal_words.delivery_status(delivery.status, delivery.attempt_count)


# A stored word → the customer's: the rules' functions themselves, under the names the templates use.
register.filter("reason_words", portal_words.why_failed)
register.filter("subscription_words", portal_words.subscription_status)
register.filter("endpoint_words", portal_words.endpoint_state)
register.filter("attempt_words", portal_words.attempt_outcome)
register.filter("error_class_words", portal_words.error)


@register.filter
def header_lines(headers) -> str:
    """Recorded headers as an HTTP message shows them, one `Name: value` a line."""
    if not isinstance(headers, dict):
        return ""
    return "\n".join(f"{name}: {value}" for name, value in headers.items())

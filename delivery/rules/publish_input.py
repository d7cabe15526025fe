"""What a publish may carry, checked the same way for the API (its serializers) and for Python (`events.publish`,
through `publishing.entry_from`): one of a JSON payload or a text message, an event type that is not Herald's
own, a subject, attributes (SNS's String, Number and String.Array), a printable ordering key, one tenant (its
external id) or a broadcast to every tenant, and what to do if that tenant is not registered. Pure: {field:
reason}."""

import math
import re
from collections.abc import Mapping

DEFAULT_EVENT_TYPE = "herald.message"  # an event published without a type; the only herald.* type anyone may publish
RESERVED_EVENT_PREFIX = "herald."
MAX_EVENT_TYPE, MAX_SUBJECT, MAX_ORDERING_KEY = 256, 1024, 256
ONE_OF = "Give exactly one of payload (JSON) or message (text)."


VERSION_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,63}")


def event_version_problem(value) -> str | None:
    """The version a payload is in (docs/versions.md): absent or null for the latest of its type."""
    if value is None or (isinstance(value, str) and VERSION_NAME.fullmatch(value)):
        return None
    return "must be a version's name: 1 to 64 letters, digits, '_', '.' or '-' (e.g. 2026-11-01)"


def event_type_problem(value) -> str | None:
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > MAX_EVENT_TYPE:
        return f"must be at most {MAX_EVENT_TYPE} characters"
    if value.startswith(RESERVED_EVENT_PREFIX) and value != DEFAULT_EVENT_TYPE:
        return (f"event types starting with {RESERVED_EVENT_PREFIX!r} are Herald's own (its subscription "
                f"confirmation, endpoint and dead-letter events); use a prefix of yours, e.g. 'order.created'")
    return None


def ordering_key_problem(value) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_ORDERING_KEY:
        return f"must be a string of at most {MAX_ORDERING_KEY} characters"
    if any(not ch.isprintable() for ch in value):
        return "must not contain control characters"
    return None


ATTRIBUTE_TYPES = ("a string (SNS's String), a number (Number) or a list of strings, numbers, true, false and null "
                   "(String.Array)")


def _scalar(item) -> bool:
    if isinstance(item, str):
        return True
    if isinstance(item, bool) or not isinstance(item, (int, float)):
        return False
    return isinstance(item, int) or math.isfinite(item)  # an int of any size is (isfinite would overflow on it)


def attributes_problem(value) -> str | None:
    """Attributes as SNS types them (docs/filtering.md, "Message attributes"): each a string, a number, or a list
    whose elements are strings, numbers, true, false or null."""
    if not isinstance(value, Mapping):
        return f"must be an object of names to values: each {ATTRIBUTE_TYPES}"
    for key, item in value.items():
        if _scalar(item):
            continue
        if isinstance(item, list) and all(_scalar(x) or x is None or isinstance(x, bool) for x in item):
            continue
        return f"{key}: an attribute value is {ATTRIBUTE_TYPES}"
    return None


TENANT_PATTERN = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


def tenant_problem(value) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not TENANT_PATTERN.fullmatch(value):
        return "must be a tenant's external id: 1 to 128 letters, digits, '_', '.', ':', '@' or '-'"
    return None


# What a publish for a tenant the owner has not registered does (docs/tenants.md, "A tenant not registered yet"):
# refuse it (400), create the tenant (within the owner's tenant quota), or record the message for the owner's own
# subscriptions only and go on.
UNKNOWN_TENANT = ("refuse", "create", "record")


def unknown_tenant_problem(value) -> str | None:
    if value is None or value in UNKNOWN_TENANT:
        return None
    return f"must be one of {', '.join(UNKNOWN_TENANT)}"


def problems(data: Mapping) -> dict[str, str]:
    """{field: reason} for a publish body (fields absent take their defaults)."""
    found = {}
    if ("payload" in data) == ("message" in data):
        found["payload"] = ONE_OF
    elif "message" in data and not isinstance(data["message"], str):
        found["message"] = "must be a string"
    checks = (("event_type", event_type_problem, DEFAULT_EVENT_TYPE), ("ordering_key", ordering_key_problem, None),
              ("attributes", attributes_problem, {}), ("event_version", event_version_problem, None))
    for name, check, default in checks:
        reason = check(data.get(name, default))
        if reason:
            found[name] = reason
    if data.get("tenant") is not None and data.get("broadcast"):
        found["broadcast"] = "a message is for one tenant or for every tenant: give tenant or broadcast, not both"
    if not isinstance(data.get("broadcast", False), bool):
        found["broadcast"] = "must be true or false"
    reason = tenant_problem(data.get("tenant"))
    if reason:
        found["tenant"] = reason
    reason = unknown_tenant_problem(data.get("unknown_tenant"))
    if reason:
        found["unknown_tenant"] = reason
    subject = data.get("subject", "")
    if not isinstance(subject, str) or len(subject) > MAX_SUBJECT:
        found["subject"] = f"must be a string of at most {MAX_SUBJECT} characters"
    return found

"""Delivery headers (Event Grid's delivery properties): up to 10 extra request headers per subscription, each a
static value (optionally secret) or taken from one of the message's attributes (pure; no Django).

A subscription stores them as a list of {"name", "value", "secret"} or {"name", "from_attribute"}. Secret values
are encrypted by the caller before they are stored and never shown again; a request records them redacted.
Herald's own headers (signatures, CloudEvents, Content-Type...) cannot be overridden.
"""

import re

MAX_HEADERS = 10
MAX_VALUE_CHARS = 4096
NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")  # an RFC 9110 token (fullmatch: `$` allows a final "\n")
# Herald's trace context (docs/operators.md, "Tracing"): never a subscription's own, even one stored before.
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
RESERVED = {"host", "content-length", "content-type", "transfer-encoding", "connection", "user-agent", "expect",
            "te", "upgrade", "keep-alive", "proxy-authorization", "trailer", *TRACE_HEADERS}
RESERVED_PREFIXES = ("webhook-", "herald-", "ce-")
REDACTED = "(secret)"


class HeaderError(ValueError):
    """A header list Herald refuses; the text names the entry (`[2].name`)."""


def valid_value(value: str) -> bool:
    """Visible ASCII, spaces and tabs, within the length limit: nothing that could end the header or the request."""
    return len(value) <= MAX_VALUE_CHARS and all(ch == "\t" or " " <= ch <= "~" for ch in value)


def validate(headers, *, kept_secrets=frozenset(), oauth: bool = False) -> list[dict]:
    """The list as stored (secret values still in plaintext; the caller encrypts them). `kept_secrets`: names of
    secret headers already stored, which may be given without a value to keep theirs (value None in the result).
    `oauth`: Herald sets Authorization itself, so it may not be given."""
    if headers in (None, []):
        return []
    if not isinstance(headers, list):
        raise HeaderError("must be a list of {name, value} or {name, from_attribute} objects")
    if len(headers) > MAX_HEADERS:
        raise HeaderError(f"at most {MAX_HEADERS} headers")
    result, seen = [], set()
    for n, header in enumerate(headers):
        where = f"[{n}]"
        if not isinstance(header, dict):
            raise HeaderError(f"{where}: must be an object with name and value, or name and from_attribute")
        unknown = set(header) - {"name", "value", "from_attribute", "secret"}
        if unknown:
            raise HeaderError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        name = header.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise HeaderError(f"{where}.name: must be a header name of 1 to 64 letters, digits or !#$%&'*+.^_`|~-")
        lowered = name.lower()
        if lowered in RESERVED or lowered.startswith(RESERVED_PREFIXES) or (oauth and lowered == "authorization"):
            raise HeaderError(f"{where}.name: {name} is set by Herald and cannot be given")
        if lowered in seen:
            raise HeaderError(f"{where}.name: {name} is given twice")
        seen.add(lowered)
        secret = header.get("secret", False)
        if not isinstance(secret, bool):
            raise HeaderError(f"{where}.secret: must be true or false")
        has_value, has_attribute = header.get("value") is not None, header.get("from_attribute") is not None
        if has_attribute:
            attribute = header["from_attribute"]
            if has_value or secret:
                raise HeaderError(f"{where}: give a value (optionally secret) or from_attribute, not both")
            if not isinstance(attribute, str) or not 0 < len(attribute) <= 256:
                raise HeaderError(f"{where}.from_attribute: must be an attribute name of 1 to 256 characters")
            result.append({"name": name, "from_attribute": attribute})
            continue
        if not has_value:
            if secret and lowered in kept_secrets:
                result.append({"name": name, "value": None, "secret": True})  # keep the stored one
                continue
            raise HeaderError(f"{where}: give a value or from_attribute")
        value = header["value"]
        if not isinstance(value, str) or not value or not valid_value(value):
            raise HeaderError(f"{where}.value: must be 1 to {MAX_VALUE_CHARS} visible ASCII characters (no line "
                              f"breaks)")
        result.append({"name": name, "value": value, "secret": secret})
    return result


def shown(stored: list[dict]) -> list[dict]:
    """The headers as the API shows them: secret values never."""
    return [{**header, "value": None} if header.get("secret") else dict(header) for header in stored or []]


def resolve(headers: list[dict], attributes: dict) -> dict[str, str]:
    """The headers of one request: static values (secrets decrypted by the caller), and attribute values where the
    message has the attribute and its value can be a header (else the header is left out)."""
    result = {}
    for header in headers:
        if "from_attribute" in header:
            value = attributes.get(header["from_attribute"])
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                continue
            value = value if isinstance(value, str) else repr(value)
            if value and valid_value(value):
                result[header["name"]] = value
        else:
            result[header["name"]] = header["value"]
    return result

"""Text that ends up in an HTTP header, checked where it is stored (pure; no Django).

A CR or LF in a header value ends the header (and starts one nobody chose); NUL, the other C0 controls and DEL are
not allowed in a field value either (RFC 9110, section 5.5), and HTTP libraries refuse them at send time, when it is
too late to tell the person who typed them. So every value Herald later sends or answers in a header is refused
when it is stored, by this one rule, with a 400 naming its field:

- a subscription's endpoint URL and OAuth2 token URL (the request line and the Host header;
  `subscribing.checked_url`), its delivery headers' names and values (`delivery_headers.validate`), and its
  policy's `requestPolicy.headerContentType` (`policy.parse`);
- the portal's `frame_ancestors`, sent in its Content-Security-Policy (`portal_settings.problems`).

Topic and event type names, subjects and tenants' ids travel percent-encoded (CloudEvents' `ce-*` headers), and a
delivery header taken from a message attribute is left out of the request when its value could not be a header.
"""

import re

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
CONTROL_BUT_TAB = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
LINE_BREAKS = {"\r", "\n"}


def control_problem(value: str, *, tab: bool = False) -> str | None:
    """Why `value` cannot go into a header, or None. `tab`: a horizontal tab is allowed (inside a header value it
    is; in a URL or an origin it is not)."""
    found = (CONTROL_BUT_TAB if tab else CONTROL).search(value)
    if found is None:
        return None
    character = found.group()
    what = ", a line break" if character in LINE_BREAKS else ", a tab" if character == "\t" else ""
    return f"must not contain control characters (found U+{ord(character):04X}{what})"

"""What an owner's portal settings may be, and what the portal makes of them (pure; no Django).

`frame_ancestors` goes into every portal answer's Content-Security-Policy header, so it is a list of plain origins
(or `'self'`), each matched whole (`fullmatch`: a regex's `$` also matches before a final line break) and free of
control characters (rules/header_text.py). `colour` goes into the pages' style sheet, so it is `#rrggbb` and
nothing else. `refresh_url` goes into a `Location` header when a link has expired, so it is an absolute https URL
(http only on a loopback address, for development) without credentials or control characters. The API, the admin's
form and `tenancy.portal_update` ask `problems`; the portal reads stored values through `csp_frame_ancestors`,
`brand_colour` and `refresh_url`, which skip what these rules would refuse, so settings stored before a rule existed
never break a page. An expired link redirects to the refresh URL only on a host the operator allowed
(`redirect_allowed`); elsewhere the portal's page links to it, naming its host. `allow_transformations` (true or
false) lets tenants write and test-run transformations for their endpoints (in the portal, and with their keys).
"""

import re
from urllib.parse import urlsplit

from delivery.rules.header_text import control_problem

MAX_ORIGINS = 20
ORIGIN = re.compile(r"https?://(\*\.)?[A-Za-z0-9.-]+(:\d{1,5})?|'self'")
COLOUR = re.compile(r"#[0-9A-Fa-f]{6}")
NOT_AN_ORIGIN = "not an origin (https://app.example.com or 'self')"


def origin_problem(value) -> str | None:
    if not isinstance(value, str):
        return NOT_AN_ORIGIN
    return control_problem(value) or (None if ORIGIN.fullmatch(value) else f"{NOT_AN_ORIGIN}: {value!r:.100}")


def frame_ancestors_problem(value) -> str | None:
    if not isinstance(value, list) or len(value) > MAX_ORIGINS:
        return f"must be a list of at most {MAX_ORIGINS} origins"
    return next((f"[{n}]: {problem}" for n, item in enumerate(value) if (problem := origin_problem(item))), None)


def colour_problem(value) -> str | None:
    if value == "":
        return None
    return None if isinstance(value, str) and COLOUR.fullmatch(value) else "A colour as #rrggbb."


MAX_URL_CHARS = 2048
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def refresh_url_problem(value) -> str | None:
    if value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_URL_CHARS:
        return f"must be a URL of at most {MAX_URL_CHARS} characters"
    problem = control_problem(value)
    if problem:
        return problem
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    try:
        port_ok = parts is not None and (parts.port is None or parts.port > 0)
    except ValueError:
        port_ok = False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or " " in value or not port_ok:
        return "must be an absolute https URL, e.g. https://app.example.com/webhooks/portal"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials (user:password@)"
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        return "must be https (http only on this machine, for development: 127.0.0.1, localhost)"
    return None


def allow_transformations_problem(value) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


CHECKS = {"frame_ancestors": frame_ancestors_problem, "colour": colour_problem, "refresh_url": refresh_url_problem,
          "allow_transformations": allow_transformations_problem}


def problems(changes: dict) -> dict[str, str]:
    """{field: reason} for each setting of `changes` that may not be stored."""
    found = {name: CHECKS[name](value) for name, value in changes.items() if name in CHECKS}
    return {name: reason for name, reason in found.items() if reason}


def csp_frame_ancestors(stored) -> str:
    """The Content-Security-Policy's frame-ancestors sources: the stored origins that pass the rule, else 'none'."""
    usable = [item for item in stored or [] if origin_problem(item) is None] if isinstance(stored, list) else []
    return " ".join(usable) or "'none'"


def refresh_url(stored) -> str:
    """The stored refresh URL when it passes the rule, else "" (the expired page says so instead)."""
    return stored if stored and refresh_url_problem(stored) is None else ""


def refresh_host(url: str) -> str:
    """The host a refresh URL (one `refresh_url` returned) leads to, as a browser shows it."""
    return (urlsplit(url).hostname or "").rstrip(".")


def redirect_allowed(url: str, allowed_hosts) -> bool:
    """Whether an expired link may send the browser straight to `url`: its host is one the operator listed
    (HERALD_PORTAL_REFRESH_HOSTS, matched whole and without regard to case). Any other is only linked to, from a
    page that shows where it leads: an owner's setting is no open redirect on the origin every owner shares."""
    host = refresh_host(url).lower()
    return bool(host) and host in {str(allowed).strip().rstrip(".").lower() for allowed in allowed_hosts or ()}


def brand_colour(stored) -> str:
    """The stored colour when it is one, else "" (the portal's own)."""
    return stored if stored and colour_problem(stored) is None else ""

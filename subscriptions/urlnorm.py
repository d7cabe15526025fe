"""Normalizing subscriber URLs so that one URL has one health record per owner (no Django here)."""

from urllib.parse import urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    pass


def ascii_host(host: str) -> str:
    """The host as an HTTP client connects to it: a name in any script in its ASCII (IDNA) form, and what only
    looks like digits or dots to a reader (`①②⑦.0.0.1`, fullwidth `１２７`, the ideographic full stop `。`) as
    the ASCII it is read as (127.0.0.1), so that the address guard sees the address that would be connected to."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        raise InvalidURL(f"the host is not a valid name ({exc})") from None


def normalize_url(url: str) -> str:
    """Lower-case scheme and host (in ASCII: `ascii_host`), drop the default port and the fragment; keep path and
    query as given."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidURL("only http and https URLs can receive webhooks")
    if not parts.hostname:
        raise InvalidURL("the URL has no host")
    if parts.username or parts.password:
        raise InvalidURL("credentials in the URL are not allowed; use a header-free endpoint or a token in the path")
    host = ascii_host(parts.hostname.lower())
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))

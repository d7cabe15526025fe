"""Normalizing subscriber URLs so that one URL has one health record per owner (no Django here)."""

from urllib.parse import urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    pass


def normalize_url(url: str) -> str:
    """Lower-case scheme and host, drop the default port and the fragment; keep path and query as given."""
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
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))

"""TLS for sends: the trust store (the system's, or HERALD_CA_BUNDLE's for endpoints under a private CA), and one
kept context per client certificate for mTLS endpoints."""

import os
import ssl
import tempfile
from functools import lru_cache

from delivery.conf import herald


@lru_cache(maxsize=4)
def _ssl_context(ca_bundle: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_bundle or None)


def ssl_context() -> ssl.SSLContext:
    """The system's trust store, or HERALD_CA_BUNDLE's certificates (for endpoints under a private CA)."""
    return _ssl_context(herald.CA_BUNDLE)


@lru_cache(maxsize=256)
def _client_context(ca_bundle: str, certificate: str, key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_bundle or None)
    # The ssl module loads a certificate chain only from files: a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="herald-mtls-") as directory:
        paths = [os.path.join(directory, name) for name in ("certificate.pem", "key.pem")]
        for path, text in zip(paths, (certificate, key), strict=True):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(text)
        context.load_cert_chain(*paths)
    return context


def client_ssl_context(credentials: tuple[str, str] | None) -> ssl.SSLContext:
    """The context of a send: with the subscription's client certificate for mTLS endpoints (one context per
    certificate, kept), else the shared one."""
    if credentials is None:
        return ssl_context()
    return _client_context(herald.CA_BUNDLE, *credentials)

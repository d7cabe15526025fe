"""Signing secrets encrypted at rest (Fernet: AES-128-CBC with HMAC-SHA256, from `cryptography`).

The database holds `fernet:<token>`, never a usable secret, so a dump or a read-only SQL injection elsewhere in the
project does not let anyone forge webhooks. Keys come from HERALD_SECRET_KEYS, a list of Fernet keys
(`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`): new writes use the
first, reads try them all, so keys rotate (add the new key first, run `manage.py herald_reencrypt`, then drop the
old one). Without HERALD_SECRET_KEYS the key is derived from SECRET_KEY (and SECRET_KEY_FALLBACKS), which keeps
secrets out of the database alone; production should set its own keys. What losing the key means, and how to
recover, is in docs/security.md.
"""

import base64
import hashlib
import logging

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

log = logging.getLogger(__name__)
PREFIX = "fernet:"


class UnreadableSecret(Exception):
    """A stored secret none of the configured keys decrypts (the key was lost or not configured)."""


def _derived(secret_key: str) -> bytes:
    digest = hashlib.sha256(b"herald.signing-secrets:" + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest)


def keys() -> list[bytes]:
    configured = getattr(settings, "HERALD_SECRET_KEYS", None) or []
    if configured:
        return [key.encode() if isinstance(key, str) else key for key in configured]
    return [_derived(settings.SECRET_KEY)] + [_derived(k) for k in getattr(settings, "SECRET_KEY_FALLBACKS", [])]


def cipher() -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys()])
    except ValueError as exc:
        raise ImproperlyConfigured(f"HERALD_SECRET_KEYS must be Fernet keys (32 url-safe base64 bytes): {exc}"
                                   ) from None


def encrypt(plaintext: str) -> str:
    return PREFIX + cipher().encrypt(plaintext.encode()).decode()


def decrypt(stored: str) -> str:
    if not stored.startswith(PREFIX):
        return stored  # written before encryption (the migration encrypts these)
    try:
        return cipher().decrypt(stored[len(PREFIX):].encode()).decode()
    except InvalidToken:
        raise UnreadableSecret("no key in HERALD_SECRET_KEYS decrypts this signing secret; rotate the "
                               "subscription's secret (docs/security.md)") from None


def reencrypt(stored: str) -> str:
    """The same secret under the first key (for key rotation)."""
    if not stored:
        return stored
    if not stored.startswith(PREFIX):
        return encrypt(stored)
    try:
        return PREFIX + cipher().rotate(stored[len(PREFIX):].encode()).decode()
    except InvalidToken:
        raise UnreadableSecret("no key in HERALD_SECRET_KEYS decrypts this signing secret") from None


class Unreadable(str):
    """What the field gives for a secret it cannot decrypt: the stored ciphertext, kept as it is if the row is saved
    again, and refused by `Subscription.signing_secrets` (an attempt then fails inside Herald, saying why)."""


class EncryptedSecretField(models.TextField):
    """A text column holding `fernet:<token>`; Python code sees the plaintext. Empty stays empty."""

    def from_db_value(self, value, expression, connection):
        if not value:
            return value
        try:
            return decrypt(value)
        except UnreadableSecret:
            log.error("a signing secret could not be decrypted: rotate the subscription's secret")
            return Unreadable(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if not value or value.startswith(PREFIX):
            return value
        return encrypt(value)

"""Client certificates for mTLS endpoints, checked on upload (pure; no Django): the certificate and key parse as PEM,
the key is the certificate's, and the certificate is valid now. Errors name the field at fault."""

from dataclasses import dataclass
from datetime import datetime

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_private_key

MAX_PEM_CHARS = 64 * 1024
EXPIRY_WARNING_DAYS = 30


class CertificateError(ValueError):
    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class CertificateInfo:
    subject: str
    not_after: datetime


def inspect(certificate_pem: str, key_pem: str, now: datetime) -> CertificateInfo:
    if not certificate_pem or not key_pem:
        missing = "client_key" if certificate_pem else "client_certificate"
        raise CertificateError(missing, "give both the client certificate and its private key (PEM), or neither")
    for field, text in (("client_certificate", certificate_pem), ("client_key", key_pem)):
        if len(text) > MAX_PEM_CHARS:
            raise CertificateError(field, f"at most {MAX_PEM_CHARS} characters of PEM")
    try:
        certificate = x509.load_pem_x509_certificate(certificate_pem.encode())
    except ValueError:
        raise CertificateError("client_certificate", "not a PEM certificate (-----BEGIN CERTIFICATE-----)") from None
    try:
        key = load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError):
        raise CertificateError("client_key", "not an unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)"
                               ) from None
    public = (Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*public) != certificate.public_key().public_bytes(*public):
        raise CertificateError("client_key", "this key is not the certificate's key")
    if certificate.not_valid_after_utc <= now:
        raise CertificateError("client_certificate",
                               f"expired on {certificate.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC")
    if certificate.not_valid_before_utc > now:
        raise CertificateError("client_certificate",
                               f"not valid before {certificate.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC")
    return CertificateInfo(subject=certificate.subject.rfc4514_string(), not_after=certificate.not_valid_after_utc)

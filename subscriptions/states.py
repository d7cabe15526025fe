"""The states of subscriptions and endpoints, defined once (pure; no Django): the models' choices, the circuit
breaker's rules and the API all use these."""

from enum import StrEnum


class SubscriptionStatus(StrEnum):
    PENDING_CONFIRMATION = "pending_confirmation"
    CONFIRMED = "confirmed"
    PAUSED = "paused"


class SignatureScheme(StrEnum):
    HMAC_SHA256 = "hmac-sha256"  # Standard Webhooks v1, a shared whsec_ secret
    ED25519 = "ed25519"  # Standard Webhooks v1a, a whsk_ signing key; receivers hold only its whpk_ public key


FILTER_SCOPES = ("MessageAttributes", "MessageBody")  # what a filter policy's keys name (as SNS's FilterPolicyScope)


class EndpointState(StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"  # tried by one probe per interval
    FROZEN = "frozen"  # never tried until enabled by hand


def choices(enum: type[StrEnum]) -> list[tuple[str, str]]:
    """Model-field choices: (stored value, readable label)."""
    return [(member.value, member.name.replace("_", " ").title()) for member in enum]

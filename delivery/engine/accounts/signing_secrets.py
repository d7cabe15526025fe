"""A subscription's signing secret: a new one made or the caller's own checked, and a rotation that keeps the old
one signing beside the new for ROTATION_GRACE (Standard Webhooks' several signatures; docs/security.md).
"""

from datetime import timedelta

from django.db import transaction

from delivery.engine.plumbing import clock
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules import signing
from subscriptions.models import Subscription, generate_secret
from subscriptions.secrets import Unreadable
from subscriptions.states import SignatureScheme


def new_secret(scheme: str, own: str | None = None) -> str:
    """A `whsec_` secret (HMAC) or a `whsk_` Ed25519 signing key; `own`: the caller's own `whsec_` secret, checked
    (a 400 naming `secret`; Ed25519 keys are always Herald's)."""
    if own is None:
        return signing.generate_signing_key() if scheme == SignatureScheme.ED25519 else generate_secret()
    if scheme == SignatureScheme.ED25519:
        raise ApplicationError("a secret of your own is for hmac-sha256 subscriptions; with ed25519 Herald keeps the "
                               "signing key and you verify with its public key", field="secret")
    problem = signing.secret_problem(own)
    if problem:
        raise ApplicationError(problem, field="secret")
    return own


ROTATION_GRACE = timedelta(hours=24)


def subscription_rotate_secret(*, subscription: Subscription, scheme: str | None = None, secret: str | None = None,
                               now=None) -> Subscription:
    """A new secret (or Ed25519 key, by the subscription's scheme, or `scheme` when it changes) — `secret`, a
    `whsec_` secret of the caller's own, if given; the old one keeps signing beside it for 24 hours. A rotation
    during a grace period ends the older secret at once (only two are ever in use)."""
    now = now or clock.now()
    new_secret(scheme or subscription.signature_scheme, secret)  # checked before anything changes
    with transaction.atomic():
        locked = Subscription.objects.select_for_update().get(id=subscription.id)
        if isinstance(locked.secret, Unreadable):  # its key was lost: nothing to keep signing with
            locked.previous_secret, locked.previous_secret_expires_at = "", None
        else:
            locked.previous_secret, locked.previous_secret_expires_at = locked.secret, now + ROTATION_GRACE
        locked.signature_scheme = scheme or locked.signature_scheme
        locked.secret = new_secret(locked.signature_scheme, secret)
        locked.save(update_fields=["secret", "previous_secret", "previous_secret_expires_at", "signature_scheme",
                                   "updated_at"])
    return locked

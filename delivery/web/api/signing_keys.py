"""The API of an Ed25519 subscription's public signing keys, as a JSON Web Key Set (`/api/keys/<keys_id>/jwks.json`),
and `public_key_of`, the one reading of a signing key's public half that the subscriptions' shapes show too."""

import base64

from django.utils import timezone
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.rules import signing
from delivery.web.api.base import HeraldAPI, extend_schema
from subscriptions.models import Subscription
from subscriptions.secrets import Unreadable
from subscriptions.states import SignatureScheme


def public_key_of(secret) -> str | None:
    """The whpk_ public key of an Ed25519 signing key (never the key itself); None for an HMAC secret."""
    if not secret or isinstance(secret, Unreadable) or not secret.startswith(signing.SIGNING_KEY_PREFIX):
        return None
    return signing.public_key(secret)


class SigningKeysView(HeraldAPI, APIView):
    """The Ed25519 public keys of one subscription, as a JSON Web Key Set: what receivers verify `v1a` signatures
    with (a key in a rotation's grace period is listed beside the new one). Public, like any public key: no token
    needed. Its address names the subscription by an unguessable id (`signing_keys_url`), never a sequential one,
    and it answers only once the endpoint has confirmed: nothing to enumerate, nothing about who uses Ed25519."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: dict}, auth=[])
    def get(self, request, keys_id):
        now = timezone.now()
        subscription = Subscription.objects.filter(
            keys_id=keys_id, signature_scheme=SignatureScheme.ED25519,
            status__in=(Subscription.Status.CONFIRMED, Subscription.Status.PAUSED)).first()
        if subscription is None:
            raise NotFound("No such key set.")
        current = [("", subscription.secret)]
        if subscription.previous_secret_expires_at and subscription.previous_secret_expires_at > now:
            current.append(("-previous", subscription.previous_secret))
        keys = []
        for suffix, secret in current:
            public = public_key_of(secret)
            if public:
                raw = signing.public_key_bytes(public)
                keys.append({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
                             "kid": f"{public[len(signing.PUBLIC_KEY_PREFIX):][:16]}{suffix}",
                             "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode(), "whpk": public})
        return Response({"keys": keys}, headers={"Cache-Control": "public, max-age=300"})

"""API token authentication: `Authorization: Token <key>`, and `Bearer <key>` too, since that is what most HTTP
clients and API tools send for a token. A tenant's key (`htk_…`) authenticates as its owner with the tenant's
access as `request.auth`: every Herald view then narrows what it shows and does to that tenant (ownership.py,
base.py)."""

from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from delivery.engine.accounts import tenancy
from delivery.web import selectors

HOW = "Send your API token as 'Authorization: Token <key>' (or 'Bearer <key>')."


class HeraldTokenAuthentication(TokenAuthentication):
    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header:
            return None
        scheme = header[0].lower()
        if scheme not in (b"token", b"bearer"):
            raise AuthenticationFailed(f"Unsupported authorization scheme {header[0][:20].decode(errors='replace')!r}. "
                                       + HOW)
        if len(header) != 2:
            raise AuthenticationFailed("The Authorization header must be '<scheme> <key>' with no spaces in the key. "
                                       + HOW)
        try:
            key = header[1].decode()
        except UnicodeError:
            raise AuthenticationFailed("The token contains invalid characters.") from None
        if key.startswith(tenancy.KEY_PREFIX):  # a tenant's key: its owner's API, narrowed to the tenant's slice
            access = tenancy.key_access(key)
            if access is None:
                raise AuthenticationFailed("Invalid token.")
            return access.tenant.owner, access
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key):
        """DRF's lookup (the key's token and user, refused if missing or inactive, in DRF's words) as one
        compiled statement (selectors.token_and_user)."""
        found = selectors.token_and_user(key)
        if found is None:
            raise AuthenticationFailed(_("Invalid token."))
        token, user = found
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        return user, token

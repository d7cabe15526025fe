"""API token authentication: `Authorization: Token <key>`, and `Bearer <key>` too, since that is what most HTTP
clients and API tools send for a token. A tenant's key (`htk_…`) authenticates as its owner with the tenant's
access as `request.auth`: every Herald view then narrows what it shows and does to that tenant (ownership.py,
base.py)."""

import functools

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS
from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from delivery.engine.accounts import tenancy
from delivery.engine.plumbing.database import Statement, instance


@functools.cache
def columns(model) -> tuple[str, ...]:
    return tuple(field.attname for field in model._meta.concrete_fields)


# A token and its user in one statement compiled once per process (every API request asks it).
TOKEN = Statement(lambda key: Token.objects.filter(key=key).values_list(
    *columns(Token), *(f"user__{name}" for name in columns(get_user_model()))), str)
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
        compiled statement."""
        found = instance(TOKEN, key)
        if found is None:
            raise AuthenticationFailed(_("Invalid token."))
        token_columns, user_model = columns(Token), get_user_model()
        user = user_model.from_db(DEFAULT_DB_ALIAS, columns(user_model), found[len(token_columns):])
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        token = Token.from_db(DEFAULT_DB_ALIAS, token_columns, found[:len(token_columns)])
        Token.user.field.set_cached_value(token, user)
        return user, token

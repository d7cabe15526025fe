"""API token authentication: `Authorization: Token <key>`, and `Bearer <key>` too, since that is what most HTTP
clients and API tools send for a token."""

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

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
        return self.authenticate_credentials(key)

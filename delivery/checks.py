"""Herald's system checks (`manage.py check`, and every command that runs checks): settings a deployment must not
leave at their development defaults."""

from django.conf import settings
from django.core.checks import Warning as CheckWarning


def public_url_is_set(app_configs=None, **kwargs) -> list:
    """HERALD_PUBLIC_URL left unset with DEBUG off: every confirmation link and tenant portal link Herald hands out
    would point at http://127.0.0.1:8000, this machine's development server."""
    if settings.DEBUG or hasattr(settings, "HERALD_PUBLIC_URL"):
        return []
    return [CheckWarning(
        "HERALD_PUBLIC_URL is not set: confirmation links and tenants' portal links point at http://127.0.0.1:8000.",
        hint="Set it to the address the outside reaches this site at, e.g. HERALD_PUBLIC_URL = "
             "\"https://webhooks.shop.example\" (docs/embedding.md).", id="herald.W001")]

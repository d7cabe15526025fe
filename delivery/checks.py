"""Herald's system checks (`manage.py check`, and every command that runs checks): settings a deployment must not
leave at their development defaults."""

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error as CheckError
from django.core.checks import Warning as CheckWarning
from django.utils.module_loading import import_string

WORKER = "delivery.engine.sending.worker.HeraldWorker"


HINT = ("Set it to the address the outside reaches this site at, scheme://host[:port], e.g. HERALD_PUBLIC_URL = "
        "\"https://shop.example\" (docs/embedding.md).")


def public_url_is_set(app_configs=None, **kwargs) -> list:
    """HERALD_PUBLIC_URL left unset with DEBUG off: every confirmation link and tenant portal link Herald hands out
    would point at http://127.0.0.1:8000, this machine's development server. Set to something that is no http(s)
    address, every such link is broken, DEBUG or not."""
    value = getattr(settings, "HERALD_PUBLIC_URL", None)
    if value is None:
        if settings.DEBUG:
            return []
        return [CheckWarning("HERALD_PUBLIC_URL is not set: confirmation links and tenants' portal links point at "
                             "http://127.0.0.1:8000.", hint=HINT, id="herald.W001")]
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [CheckError(f"HERALD_PUBLIC_URL is {value!r}, which is no http(s) address: the links built on it do "
                           "not open.", hint=HINT, id="herald.E002")]
    return []


def worker_class_imports(app_configs=None, **kwargs) -> list:
    """RQ["WORKER_CLASS"] names a class that imports: a path from before the engine's wings (delivery.engine.worker)
    would stop every `rqworker` at start-up."""
    named = (getattr(settings, "RQ", None) or {}).get("WORKER_CLASS")
    if not named:
        return []
    try:
        import_string(named)
    except ImportError:
        return [CheckError(f"RQ[\"WORKER_CLASS\"] names {named!r}, which cannot be imported.",
                           hint=f"Herald's worker is {WORKER!r} (docs/deployment.md, Upgrades).", id="herald.E001")]
    return []

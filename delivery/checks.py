"""Herald's system checks (`manage.py check`, and every command that runs checks): settings a deployment must not
leave at their development defaults."""

from django.conf import settings
from django.core.checks import Error as CheckError
from django.core.checks import Warning as CheckWarning
from django.utils.module_loading import import_string

WORKER = "delivery.engine.sending.worker.HeraldWorker"


def public_url_is_set(app_configs=None, **kwargs) -> list:
    """HERALD_PUBLIC_URL left unset with DEBUG off: every confirmation link and tenant portal link Herald hands out
    would point at http://127.0.0.1:8000, this machine's development server."""
    if settings.DEBUG or hasattr(settings, "HERALD_PUBLIC_URL"):
        return []
    return [CheckWarning(
        "HERALD_PUBLIC_URL is not set: confirmation links and tenants' portal links point at http://127.0.0.1:8000.",
        hint="Set it to the address the outside reaches this site at, e.g. HERALD_PUBLIC_URL = "
             "\"https://webhooks.shop.example\" (docs/embedding.md).", id="herald.W001")]


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

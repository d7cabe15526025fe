"""Probes for a platform (Kubernetes, a load balancer): unauthenticated, cheap, and not logged per call.

    GET /healthz   200 {"status": "ok"}: the process answers (liveness); touches nothing else
    GET /readyz    200 when PostgreSQL and Redis answer and every migration is applied (readiness); else 503
                   {"status": "unavailable", "missing": [...]} naming each, and nothing else is wrong with the
                   process: it stays up and answers 200 again once they are back

Herald's own project answers them in `ProbeMiddleware`, before anything reads the Host header, so a probe sent to
a pod's address works whatever ALLOWED_HOSTS says; a host project that mounts `delivery.urls` gets the same views
under its mount (`/herald/healthz`). A worker's and the scheduler's liveness is `manage.py herald_alive`
(delivery/heartbeat.py).
"""

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse

from delivery import VERSION
from delivery.engine.plumbing import availability

PATHS = ("/healthz", "/readyz")
_migrated = {"done": False}  # a cache: once every migration is applied, a process does not read them again


def healthz(request):
    return JsonResponse({"status": "ok", "version": VERSION})


def readyz(request):
    missing = [f"{dependency.name} does not answer" for dependency in availability.unreachable()]
    if not missing:
        pending = migrations_pending()
        if pending:
            missing.append(f"{pending} migration(s) not applied (run manage.py migrate)")
    if missing:
        response = JsonResponse({"status": "unavailable", "missing": missing, "version": VERSION}, status=503)
        # Not logged per call (a probe asks every few seconds): what is away is logged once, by `availability`,
        # when it goes and when it comes back. Django's own mark for a response it need not log again.
        response._has_been_logged = True
        return response
    return JsonResponse({"status": "ready", "version": VERSION})


def migrations_pending() -> int:
    if _migrated["done"]:
        return 0
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    pending = len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    _migrated["done"] = pending == 0
    return pending


class ProbeMiddleware:
    """Answers /healthz and /readyz before the rest of the stack (host checks, sessions, tracing)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info in PATHS and request.method in ("GET", "HEAD"):
            return healthz(request) if request.path_info == "/healthz" else readyz(request)
        return self.get_response(request)

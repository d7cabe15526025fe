from importlib import import_module

from django.apps import AppConfig
from django.core import checks


class DeliveryConfig(AppConfig):
    # A label of its own, so a host project may have an app called "subscriptions" or "delivery" too.
    label = "herald_delivery"
    name = "delivery"
    verbose_name = "Delivery"

    def ready(self) -> None:
        # Every Herald process (web, worker, scheduler) may open as many files as its hard limit allows: a worker's
        # sockets are budgeted against it (delivery/transport/descriptors.py).
        import_module("delivery.transport.descriptors").raise_soft_limit()
        # No credential reaches a log line of this process, whoever logs it (delivery/redaction.py).
        import_module("delivery.redaction").install()
        # Herald's operational events are receivers of its own signals; the engine is importable only once the
        # models are, hence here (Django's place for connecting signals).
        import_module("delivery.engine.intake.operational").connect()
        # OpenTelemetry, when installed and asked for (OTEL_* variables, or a host project's own provider).
        import_module("delivery.engine.plumbing.tracing").configure()
        herald_checks = import_module("delivery.checks")
        checks.register(herald_checks.public_url_is_set, checks.Tags.compatibility)
        checks.register(herald_checks.worker_class_imports, checks.Tags.compatibility)

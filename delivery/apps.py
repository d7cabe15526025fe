from django.apps import AppConfig
from django.core import checks


class DeliveryConfig(AppConfig):
    # A label of its own, so a host project may have an app called "subscriptions" or "delivery" too.
    label = "herald_delivery"
    name = "delivery"
    verbose_name = "Delivery"

    def ready(self) -> None:
        # Django's place for what needs the apps loaded: Herald's modules import its models.
        from delivery import checks as herald_checks
        from delivery import redaction
        from delivery.engine.intake import operational
        from delivery.engine.plumbing import tracing
        from delivery.transport import descriptors

        # Every Herald process (web, worker, scheduler) may open as many files as its hard limit allows: a worker's
        # sockets are budgeted against it (delivery/transport/descriptors.py).
        descriptors.raise_soft_limit()
        # No credential reaches a log line of this process, whoever logs it (delivery/redaction.py).
        redaction.install()
        # Herald's operational events are receivers of its own signals (Django's place for connecting signals).
        operational.connect()
        # OpenTelemetry, when installed and asked for (OTEL_* variables, or a host project's own provider); the SDK
        # is imported only when an exporter is asked for.
        exporters = tracing.configure()
        if exporters:
            from delivery.engine.plumbing import tracing_setup

            tracing_setup.start_sdk(exporters)
        checks.register(herald_checks.public_url_is_set, checks.Tags.compatibility)
        checks.register(herald_checks.worker_class_imports, checks.Tags.compatibility)

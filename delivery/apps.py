from django.apps import AppConfig


class DeliveryConfig(AppConfig):
    # A label of its own, so a host project may have an app called "subscriptions" or "delivery" too.
    label = "herald_delivery"
    name = "delivery"
    verbose_name = "Delivery"

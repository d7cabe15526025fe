from django.apps import AppConfig


class SubscriptionsConfig(AppConfig):
    # A label of its own, so a host project may have an app called "subscriptions" or "delivery" too.
    label = "herald_subscriptions"
    name = "subscriptions"
    verbose_name = "Topics and subscriptions"

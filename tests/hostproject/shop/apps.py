from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "shop"

    def ready(self):
        from delivery.events import publish_on_save
        from shop.models import Customer

        # Every customer change is an event on the "customers" topic, written in the same transaction as the save.
        publish_on_save(Customer, "customers", fields=["name", "email"])

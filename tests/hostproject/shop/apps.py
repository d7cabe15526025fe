from django.apps import AppConfig
from django.db.models.signals import post_save


class ShopConfig(AppConfig):
    name = "shop"

    def ready(self):
        from delivery.events import publish_on_save
        from shop.models import Customer

        # Every customer change is an event on the "customers" topic, written in the same transaction as the save.
        publish_on_save(Customer, "customers", fields=["name", "email"])
        # Every customer is a tenant of the shop's: it subscribes to its own order events (shop.views).
        post_save.connect(register_tenant, sender=Customer, dispatch_uid="shop.tenants")


def register_tenant(sender, instance, created, raw=False, **kwargs):
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from delivery.tenants import tenant_create

    if created and not raw:
        owner = get_user_model().objects.get(username=settings.HERALD_PUBLISH_OWNER)
        tenant_create(owner=owner, external_id=f"customer-{instance.pk}", name=instance.name)

"""Herald's own URLs plus a Django view that receives Herald's webhooks through @webhook_receiver (used by
tests/test_embedding.py with a live server)."""

from django.urls import path

from delivery.receiver import webhook_receiver
from project.urls import urlpatterns as herald_urls

secrets: list[str] = []
received: list = []


@webhook_receiver(secrets=lambda request: secrets)
def order_events(request, event):
    received.append(event)


urlpatterns = [path("hooks/orders/", order_events), *herald_urls]

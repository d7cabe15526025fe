"""Herald's own URLs plus a Django view that receives Herald's webhooks through @webhook_receiver (used by
tests/test_embedding.py with a live server)."""

from django.urls import path

from delivery.receiver import webhook_receiver
from project.urls import urlpatterns as herald_urls

secrets: list[str] = []
received: list = []
invoices: list = []


@webhook_receiver(secrets=lambda request: secrets)
def order_events(request, event):
    received.append(event)


@webhook_receiver(secrets=lambda request: secrets)
def invoice_events(request, event):
    invoices.append(event)


urlpatterns = [path("hooks/orders/", order_events), path("hooks/invoices/", invoice_events), *herald_urls]

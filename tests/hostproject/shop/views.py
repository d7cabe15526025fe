import json
from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.http import HttpResponseRedirect, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from delivery.events import publish
from delivery.receiver import webhook_receiver
from delivery.tenants import portal_link
from shop.models import Customer, Order, ReceivedEvent
from subscriptions.models import Tenant

SECRETS: list[str] = []  # the test puts the subscription's secret here
CUSTOMER_SECRETS: dict[str, list[str]] = {}  # each customer's receiver (its path): the secret its portal showed


@csrf_exempt
def place_order(request):
    """The business write and its event in one transaction: an order that fails to save announces nothing."""
    body = json.loads(request.body)
    try:
        with transaction.atomic():
            order = Order.objects.create(customer=Customer.objects.get(id=body["customer"]),
                                         total=Decimal(body["total"]))
            publish("orders", {"order": order.id, "total": str(order.total)}, event_type="order.placed",
                    subject=f"order:{order.id}", tenant=f"customer-{order.customer_id}")
            if order.total <= 0:
                raise ValueError("an order must cost something")
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"order": order.id}, status=201)


@webhook_receiver(secrets=lambda request: SECRETS)
def order_events(request, event):
    ReceivedEvent.objects.create(event_id=event.id, type=event.type, data=event.data)


def webhooks_settings(request, customer_id):
    """The shop's "Webhooks" page for a signed-in customer (here: by id): off to its own portal, for an hour."""
    customer = Customer.objects.get(id=customer_id)
    tenant = Tenant.objects.get(owner__username="shop", external_id=f"customer-{customer.id}")
    return HttpResponseRedirect(portal_link(tenant, ttl=timedelta(hours=1)))


@webhook_receiver(secrets=lambda request: CUSTOMER_SECRETS.get(request.path, []), dedupe=False)
def customer_events(request, event, customer_id):
    """Stands in for each customer's own receiver: what arrives at customer N's URL is recorded as N's."""
    ReceivedEvent.objects.create(event_id=event.id, type=f"customer-{customer_id}:{event.type}", data=event.data)

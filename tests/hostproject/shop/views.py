import json
from decimal import Decimal

from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from delivery.events import publish
from delivery.receiver import webhook_receiver
from shop.models import Customer, Order, ReceivedEvent

SECRETS: list[str] = []  # the test puts the subscription's secret here


@csrf_exempt
def place_order(request):
    """The business write and its event in one transaction: an order that fails to save announces nothing."""
    body = json.loads(request.body)
    try:
        with transaction.atomic():
            order = Order.objects.create(customer=Customer.objects.get(id=body["customer"]),
                                         total=Decimal(body["total"]))
            publish("orders", {"order": order.id, "total": str(order.total)}, event_type="order.placed",
                    subject=f"order:{order.id}")
            if order.total <= 0:
                raise ValueError("an order must cost something")
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"order": order.id}, status=201)


@webhook_receiver(secrets=lambda request: SECRETS)
def order_events(request, event):
    ReceivedEvent.objects.create(event_id=event.id, type=event.type, data=event.data)

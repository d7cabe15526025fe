"""The plumbing's fixtures: a catalog, topics, subscriptions and deliveries of two owners (database's and shortcuts'
tests)."""

import pytest
from django.utils import timezone

from subscriptions.models import Endpoint, EventType, Subscription, Tenant, Topic


@pytest.fixture
def catalog_world(django_user_model):
    """Two owners, a tenant, topics with subscriptions of every audience and JSON columns, and event types."""
    owner = django_user_model.objects.create_user("statement-owner")
    other = django_user_model.objects.create_user("statement-other")
    tenant = Tenant.objects.create(owner=owner, external_id="acme", name="Acme")
    topic = Topic.objects.create(owner=owner, name="orders", delivery_policy={"healthyRetryPolicy": {"numRetries": 2}})
    Topic.objects.create(owner=other, name="orders")
    for n, (tenant_of, policy) in enumerate([(None, {"region": ["eu"]}), (tenant, None), (None, None)]):
        endpoint = Endpoint.objects.create(owner=owner, tenant=tenant_of, url=f"https://example.com/hook/{n}")
        Subscription.objects.create(topic=topic, endpoint=endpoint, tenant=tenant_of, filter_policy=policy,
                                    event_types=["order.created"] if n == 2 else [], status="confirmed",
                                    confirmed_at=timezone.now())
    for name, validate in [("order.created", True), ("order.paid", True), ("order.gone", False)]:
        EventType.objects.create(owner=owner, name=name, schema={"type": "object"}, validate_payloads=validate)
    return owner, other, tenant, topic

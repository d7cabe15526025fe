"""States at a glance (console/badges.py): an endpoint's health and a delivery's status in their colours, and an
endpoint as the other pages link to it."""

import pytest

from delivery.engine.accounts import recovery
from delivery.engine.state import health
from delivery.models import Delivery
from subscriptions.models import Endpoint
from tests.conftest import publish
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db(transaction=True)  # a delivery's page reads in a transaction of its own


def badge(colour: str, word: str) -> str:
    return (f'<span class="herald-badge" style="background:{colour};color:#fff;padding:2px 8px;border-radius:10px;'
            f'font-weight:600">{word}</span>')


@pytest.fixture
def endpoints(api, redis_conn):
    """Three endpoints of one topic, one message published to each: active, disabled and frozen."""
    topic = create_topic(api)
    for name in ("active", "disabled", "frozen"):
        create_subscription(api, topic["id"], f"http://127.0.0.1:9/{name}")
    publish(api, topic)
    health.endpoint_disable(endpoint=Endpoint.objects.get(url="http://127.0.0.1:9/disabled"))
    health.endpoint_freeze(endpoint=Endpoint.objects.get(url="http://127.0.0.1:9/frozen"))
    return {endpoint.url.rsplit("/", 1)[1]: endpoint for endpoint in Endpoint.objects.all()}


def test_the_endpoints_list_shows_each_state_in_its_colour(admin_client, endpoints):
    page = admin_client.get("/admin/herald_subscriptions/endpoint/").content.decode()
    assert badge("#2e7d32", "active") in page
    assert badge("#ef6c00", "disabled") in page
    assert badge("#1565c0", "frozen") in page


def test_the_deliveries_list_shows_each_status_in_its_colour(admin_client, endpoints):
    recovery.delivery_dead_letter(delivery=Delivery.objects.get(endpoint=endpoints["active"]))
    page = admin_client.get("/admin/herald_delivery/delivery/").content.decode()
    assert page.count(badge("#c62828", "dead_lettered")) == 1
    assert page.count(badge("#ef6c00", "pending")) == 2


def test_a_deliverys_and_a_subscriptions_page_link_to_the_endpoint_with_its_state(admin_client, endpoints):
    frozen = endpoints["frozen"]
    link = (f'<a href="/admin/herald_subscriptions/endpoint/{frozen.id}/change/">http://127.0.0.1:9/frozen</a> '
            + badge("#1565c0", "frozen"))
    delivery = Delivery.objects.get(endpoint=frozen)
    assert link in admin_client.get(f"/admin/herald_delivery/delivery/{delivery.id}/change/").content.decode()
    subscription = f"/admin/herald_subscriptions/subscription/{delivery.subscription_id}/change/"
    assert link in admin_client.get(subscription).content.decode()

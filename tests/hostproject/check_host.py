"""The host project's own tests (run by tests/test_host_project.py, against Herald installed with pip): the shop
publishes in its transactions, receives through Herald's receiver helper, and has Herald's API, admin, dashboard
and docs under its own URLs; its tests use the herald_outbox fixture the package installs."""

import io
import re
from urllib.parse import urlsplit

import django_rq
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token
from rq import SimpleWorker

import delivery
from delivery.models import Message
from shop import views
from shop.models import Customer, ReceivedEvent
from subscriptions.models import Subscription

pytestmark = pytest.mark.django_db(transaction=True)


def drain():
    queues = [django_rq.get_queue("deliveries"), django_rq.get_queue("retries")]
    SimpleWorker(queues, connection=django_rq.get_connection("deliveries")).work(burst=True, logging_level="WARNING")


@pytest.fixture(autouse=True)
def empty_redis():
    django_rq.get_connection("deliveries").flushdb()
    yield


def test_herald_is_the_installed_package():
    assert "/site-packages/delivery/" in delivery.__file__, delivery.__file__


def test_the_shop_publishes_in_its_transactions_and_receives_through_the_helper(live_server, client):
    shop = get_user_model().objects.create_user("shop", password="pw-shop-1", is_staff=True, is_superuser=True)
    api = Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=shop).key}")
    assert api.post("/herald/api/topics/", {"name": "orders"}, content_type="application/json").status_code == 201
    hook = f"{live_server.url}/hooks/orders/"
    # docs/embedding.md's receiver walkthrough, step by step: make a secret, configure the view, subscribe with it.
    out = io.StringIO()
    call_command("herald_secret", stdout=out)
    secret = out.getvalue().strip()
    views.SECRETS[:] = [secret]
    created = api.post("/herald/api/subscriptions/", {"topic": "orders", "endpoint": hook, "secret": secret},
                       content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["status"] == "pending_confirmation"  # Herald's default: endpoints confirm first
    drain()  # the confirmation request the create asked for, verified and answered by the helper
    assert Subscription.objects.get().status == "confirmed"

    customer = Customer.objects.create(name="Ann", email="ann@example.com")  # an event on "customers" as well
    placed = client.post("/orders/", {"customer": customer.id, "total": "12.50"}, content_type="application/json")
    refused = client.post("/orders/", {"customer": customer.id, "total": "0"}, content_type="application/json")
    assert placed.status_code == 201 and refused.status_code == 400
    drain()
    received = list(ReceivedEvent.objects.values_list("type", "data"))
    assert received == [("order.placed", {"order": placed.json()["order"], "total": "12.50"})]
    assert Message.objects.filter(topic__name="orders").count() == 1  # the refused order's event rolled back with it
    assert Message.objects.get(topic__name="customers").event_type == "shop.customer.created"

    message_id = Message.objects.get(topic__name="orders").id
    fanout = api.get(f"/herald/api/messages/{message_id}/").json()["fanout"]
    assert [(row["outcome"], row["delivery"]["status"]) for row in fanout] == [("delivery_created", "succeeded")]

    client.force_login(shop)
    for page in ("/admin/", "/admin/herald_delivery/delivery/", f"/admin/herald_delivery/message/{message_id}/change/",
                 "/admin/herald_subscriptions/endpoint/", "/herald/dashboard/", "/herald/api/"):
        assert client.get(page).status_code == 200, page
    index = client.get("/admin/").content.decode()
    assert 'href="/admin/herald_delivery/dashboard/"' in index  # the host's admin index links Herald's dashboard
    assert client.get("/admin/herald_delivery/dashboard/")["Location"] == "/herald/dashboard/"
    docs = client.get("/herald/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs and "cdn" not in docs
    schema = client.get("/herald/api/schema/?format=json").json()
    assert "/herald/api/topics/{id}/publish/" in schema["paths"]


def test_two_customers_each_add_their_endpoint_through_a_portal_link(live_server, client, settings):
    """The shop as a small SaaS: each customer is a tenant, opens its portal from the shop's "Webhooks" page, adds
    its own endpoint (the secret shown once goes to its receiver), confirms it, and receives its own orders only."""
    settings.HERALD_PUBLIC_URL = live_server.url  # the shop's site, as its customers' browsers reach it
    shop = get_user_model().objects.create_user("shop", password="pw-shop-1")
    api = Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=shop).key}")
    orders = api.post("/herald/api/topics/", {"name": "orders", "open_to_tenants": True},
                      content_type="application/json").json()
    customers = [Customer.objects.create(name=name, email=f"{name.lower()}@example.com") for name in ("Ann", "Bo")]
    for customer in customers:
        portal = client.get(f"/account/{customer.id}/webhooks/", follow=True)
        assert portal.status_code == 200 and "Your endpoints" in portal.content.decode()
        base = portal.redirect_chain[-1][0]
        assert base.startswith(f"{live_server.url}/herald/portal/")  # a full link, as the API's
        base = urlsplit(base).path
        hook = f"/customers/{customer.id}/hook/"
        added = client.post(f"{base}subscriptions/new/", {"url": live_server.url + hook, "topic": orders["id"]})
        assert added.status_code == 200 and "shown only this once" in added.content.decode(), added.content[:3000]
        views.CUSTOMER_SECRETS[hook] = [re.search(r'id="secret"[^>]*>(whsec_[^<]+)<', added.content.decode()).group(1)]
    drain()  # each customer's receiver verifies and answers its own handshake
    assert sorted(Subscription.objects.filter(tenant__isnull=False).values_list("status", flat=True)) == [
        "confirmed", "confirmed"]

    ann, bo = customers
    for customer, total in ((ann, "10.00"), (bo, "20.00"), (ann, "30.00")):
        assert client.post("/orders/", {"customer": customer.id, "total": total},
                           content_type="application/json").status_code == 201
    drain()
    received = sorted((kind, data["total"]) for kind, data in ReceivedEvent.objects.values_list("type", "data"))
    assert received == [(f"customer-{ann.id}:order.placed", "10.00"), (f"customer-{ann.id}:order.placed", "30.00"),
                        (f"customer-{bo.id}:order.placed", "20.00")]
    # Ann's key (or link) sees Ann's deliveries only
    tenant = api.get(f"/herald/api/tenants/?external_id=customer-{ann.id}").json()["results"][0]
    key = api.post(f"/herald/api/tenants/{tenant['id']}/keys/", {}, content_type="application/json").json()["key"]
    anns = Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/herald/api/deliveries/").json()
    assert anns["count"] == 2
    assert {d["endpoint"] for d in anns["results"]} == {f"{live_server.url}/customers/{ann.id}/hook/"}


def test_the_outbox_fixture_comes_with_the_package(herald_outbox):
    get_user_model().objects.create_user("shop")
    Customer.objects.create(name="Bo", email="bo@example.com")
    assert [(e.topic, e.event_type, e.payload["name"]) for e in herald_outbox] == [
        ("customers", "shop.customer.created", "Bo")]

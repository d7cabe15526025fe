"""A publish for a customer who is not a tenant yet (docs/tenants.md, "A tenant not registered yet"): from Python it
never fails the caller's transaction by surprise (record, the default, or create), and the strict answer is one
argument away; through the API it is a 400 unless the body asks for create or record."""

import logging

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import override_settings

from delivery.events import PublishError, publish
from delivery.models import Message
from subscriptions.models import Tenant
from tests.delivery.web.api.shop import receivers_of
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture


def test_an_unregistered_tenant_does_not_roll_back_the_shops_transaction(shop, user, caplog):
    with transaction.atomic():
        get_user_model().objects.create_user("invoice-42")  # the shop's own business row
        message = publish("orders", {"invoice": 42}, owner=user, tenant="initech")
    assert get_user_model().objects.filter(username="invoice-42").exists()
    assert receivers_of(message.id) == {"own"}  # kept for the owner's own subscriptions, nobody else's
    assert message.tenant_id is None and not Tenant.objects.filter(external_id="initech").exists()
    assert any("names tenant 'initech', which is not registered" in r.getMessage() for r in caplog.records
               if r.levelno == logging.WARNING)


def test_create_registers_the_tenant_on_its_first_publish(shop, user):
    with transaction.atomic():
        message = publish("orders", {"n": 1}, owner=user, tenant="initech", unknown_tenant="create")
    tenant = Tenant.objects.get(owner=user, external_id="initech")
    assert message.tenant_id == tenant.id and receivers_of(message.id) == {"own"}
    again = publish("orders", {"n": 2}, owner=user, tenant="initech", unknown_tenant="create")
    assert again.tenant_id == tenant.id and Tenant.objects.filter(external_id="initech").count() == 1


@override_settings(HERALD_PUBLISH_UNKNOWN_TENANT="refuse")
def test_the_strict_answer_is_a_setting_or_an_argument_away(shop, user):
    with pytest.raises(PublishError, match="You have no tenant 'initech'; register it first"):
        publish("orders", 1, owner=user, tenant="initech")
    with pytest.raises(PublishError, match="unknown_tenant"):
        publish("orders", 1, owner=user, tenant="initech", unknown_tenant="sometimes")
    assert publish("orders", 1, owner=user, tenant="initech", unknown_tenant="record").tenant_id is None


@override_settings(HERALD_MAX_TENANTS_PER_OWNER=2)
def test_create_keeps_to_the_tenant_quota(shop, user):
    with pytest.raises(PublishError, match="'initech' is not registered and cannot be created.*HERALD_MAX_TENANTS"):
        publish("orders", 1, owner=user, tenant="initech", unknown_tenant="create")


def test_the_api_refuses_unless_the_body_chooses(shop):
    api, orders = shop["api"], shop["orders"]
    url = f"/api/topics/{orders['id']}/publish/"
    refused = api.post(url, {"payload": 1, "tenant": "initech"}, format="json")
    assert refused.status_code == 400 and "/api/tenants/" in refused.json()["tenant"][0]
    bad = api.post(url, {"payload": 1, "tenant": "initech", "unknown_tenant": "maybe"}, format="json")
    assert bad.status_code == 400 and "unknown_tenant" in bad.json()
    recorded = api.post(url, {"payload": 1, "tenant": "initech", "unknown_tenant": "record"}, format="json")
    assert recorded.status_code == 202 and receivers_of(recorded.json()["message_id"]) == {"own"}
    created = api.post(url, {"payload": 2, "tenant": "initech", "unknown_tenant": "create"}, format="json")
    assert created.status_code == 202
    assert Message.objects.get(id=created.json()["message_id"]).tenant.external_id == "initech"
    batch = api.post(f"/api/topics/{orders['id']}/publish-batch/", {"entries": [
        {"id": "a", "payload": 1, "tenant": "umbrella", "unknown_tenant": "create"},
        {"id": "b", "payload": 2, "tenant": "umbrella"}]}, format="json").json()
    assert [s["id"] for s in batch["successful"]] == ["a", "b"]  # b: umbrella exists by the time b is addressed

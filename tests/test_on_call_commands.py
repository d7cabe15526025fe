"""manage.py herald_why and herald_status, against real PostgreSQL and Redis (docs/operators.md, "On call")."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from delivery.events import publish
from delivery.management.commands.herald_redis import configured_elsewhere
from delivery.models import Delivery
from subscriptions.models import Endpoint, Subscription, Tenant
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_herald_why_answers_for_every_subscription_or_one(shop):
    owner = Tenant.objects.get(external_id="acme").owner
    message = publish("orders", {"n": 1}, owner=owner, tenant="acme")
    said = run("herald_why", str(message.id))
    assert f"message {message.id} on topic 'orders'" in said and "for tenant 'acme'" in said
    assert "outcomes: delivery_created 2, not_addressed 1" in said
    globex = shop["globex"]["subscription"]["id"]
    one = run("herald_why", str(message.id), str(globex))
    assert f"subscription {globex} (tenant globex) → http://127.0.0.1:9\n" in one
    assert "not_addressed: published for tenant 'acme'" in one
    assert "fix: none, if that was meant; to reach it, publish with tenant='globex'" in one
    assert one.count("\nsubscription ") == 1
    assert "not_addressed" not in run("herald_why", str(message.id), "--outcome", "delivery_created").split(
        "outcomes:")[1].split("\n", 1)[1]
    with pytest.raises(CommandError, match="No message 'nope'"):
        run("herald_why", "nope")
    with pytest.raises(CommandError, match="not one of topic 'orders'"):
        run("herald_why", str(message.id), "999999")


def test_herald_status_says_where_each_owner_stands(shop, user):
    owner = Tenant.objects.get(external_id="acme").owner
    publish("orders", {"n": 1}, owner=owner, broadcast=True)
    now = timezone.now()
    Delivery.objects.update(next_attempt_at=now - timedelta(seconds=90))
    endpoint = Endpoint.objects.get(url="http://127.0.0.1:9/globex")
    Endpoint.objects.filter(id=endpoint.id).update(url="http://127.0.0.1:9/globex?token=s3cret", state="frozen",
                                                   state_reason="30 failures in a row")
    Subscription.objects.filter(id=shop["acme"]["subscription"]["id"]).update(status="pending_confirmation")
    said = run("herald_status")
    assert f"{owner.username} (owner {owner.id}): due 3 (lag " in said
    assert "awaiting confirmation 1" in said
    assert "frozen: http://127.0.0.1:9 (30 failures in a row)" in said
    assert "s3cret" not in said and "/globex" not in said  # the host, as the logs give it
    assert said.startswith("queues: deliveries ")
    figures = json.loads(run("herald_status", "--json"))
    [mine] = figures["owners"]
    assert mine["due"] == 3 and 85 <= mine["lag_seconds"] < 600 and mine["unhealthy"][0]["state"] == "frozen"


def test_herald_redis_leaves_alone_a_redis_the_projects_settings_name(settings):
    """An embedding project sets RQ_QUEUES (or REDIS_URL) in its settings, not in the environment: `herald_redis`
    starts no local Redis in its way."""
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, "deliveries": {"URL": "redis://cache.internal:6380/2"}}
    assert configured_elsewhere() == "cache.internal:6380/2"
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, "deliveries": {"URL": "redis://127.0.0.1:6379/0"}}
    assert configured_elsewhere() == ""

"""The deliveries resource (delivery/web/api/deliveries.py): a delivery in the list, and with its attempts' request and
response excerpts in detail; `retry`, which attempts one now (a dead letter with a fresh budget) and refuses what is
not retryable; a tenant's key reads and retries its own deliveries only."""

import pytest

from delivery.engine.accounts import recovery
from delivery.events import publish as publish_from_python
from delivery.models import Attempt, Delivery
from subscriptions.models import Tenant
from tests.conftest import FAST, drain, publish, subscribe
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
shop = shop_fixture

LISTED = ["id", "message", "subscription", "endpoint", "status", "attempt_count", "next_attempt_at",
          "first_attempt_at", "last_attempt_at", "delivered_at", "dead_letter_reason", "finished_at", "ordering_key",
          "replay", "created_at"]
ATTEMPT = ["id", "number", "queue", "started_at", "duration_ms", "request_url", "request_headers", "request_body",
           "response_status", "response_headers", "response_body", "error_class", "error_detail", "outcome"]


def test_a_delivery_is_listed_and_shown_with_its_attempts(api, receiver, redis_conn):
    receiver.script = [Reply(status=503, body=b'{"error":"busy"}')]
    topic, subscription = subscribe(api, receiver, FAST)
    published = publish(api, topic, {"n": 1})
    drain()
    listed = api.get("/api/deliveries/").json()["results"]
    assert [list(row) for row in listed] == [LISTED]
    delivery = Delivery.objects.get()
    assert {name: listed[0][name] for name in ("id", "message", "subscription", "endpoint", "status",
                                               "attempt_count", "dead_letter_reason", "replay")} == {
        "id": delivery.id, "message": published["message_id"], "subscription": subscription["id"],
        "endpoint": receiver.url, "status": "pending", "attempt_count": 1, "dead_letter_reason": "", "replay": None}
    detail = api.get(f"/api/deliveries/{delivery.id}/").json()
    assert list(detail) == [*LISTED, "attempts"]
    [attempt] = detail["attempts"]
    assert list(attempt) == ATTEMPT
    assert {name: attempt[name] for name in ("number", "queue", "request_url", "response_status", "response_body",
                                             "error_class", "outcome")} == {
        "number": 1, "queue": "deliveries", "request_url": receiver.url, "response_status": 503,
        "response_body": '{"error":"busy"}', "error_class": "http_status", "outcome": "retryable_failure"}
    assert '"n": 1' in attempt["request_body"] or '"n":1' in attempt["request_body"]


def test_retry_attempts_a_dead_letter_now_with_a_fresh_budget_and_refuses_a_settled_one(api, receiver, redis_conn):
    receiver.script = [Reply(status=500), Reply(status=200)]
    topic, _ = subscribe(api, receiver, FAST)
    publish(api, topic, "again")
    drain()  # the first try fails; the next is due in 5 s
    delivery = Delivery.objects.get()
    recovery.delivery_dead_letter(delivery=delivery)
    retried = api.post(f"/api/deliveries/{delivery.id}/retry/")
    assert retried.status_code == 202, retried.content
    assert list(retried.json()) == LISTED
    assert (retried.json()["status"], retried.json()["dead_letter_reason"]) == ("pending", "")
    drain()
    assert [request.json()["data"] for request in receiver.wait_for(2)] == ["again", "again"]
    assert list(Attempt.objects.order_by("number").values_list("number", "queue", "outcome")) == [
        (1, "deliveries", "retryable_failure"), (2, "manual", "success")]
    settled = api.post(f"/api/deliveries/{delivery.id}/retry/")
    assert (settled.status_code, settled.json()) == (409, {"detail": "A succeeded delivery cannot be retried."})


def test_a_tenant_reads_and_retries_its_own_deliveries_only(shop, user):
    owner = Tenant.objects.get(external_id="acme").owner
    message = publish_from_python("orders", {"n": 1}, owner=owner, tenant="acme")
    deliveries = {delivery.subscription.tenant.external_id if delivery.subscription.tenant else "own": delivery.id
                  for delivery in Delivery.objects.filter(message=message).select_related("subscription__tenant")}
    assert set(deliveries) == {"acme", "own"}
    acme, globex = shop["acme"]["client"], shop["globex"]["client"]
    assert [row["id"] for row in acme.get("/api/deliveries/").json()["results"]] == [deliveries["acme"]]
    assert globex.get("/api/deliveries/").json()["count"] == 0
    assert acme.post(f"/api/deliveries/{deliveries['acme']}/retry/").status_code == 202
    for client, delivery in ((globex, deliveries["acme"]), (acme, deliveries["own"])):
        assert client.get(f"/api/deliveries/{delivery}/").status_code == 404
        assert client.post(f"/api/deliveries/{delivery}/retry/").status_code == 404

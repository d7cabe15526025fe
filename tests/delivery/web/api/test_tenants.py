"""Tenants (docs/tenants.md): an owner's customers subscribe to the owner's open topics with keys of their own,
receive only the events published for them (or broadcast), and see nothing else: every other object answers 404,
on every route of the schema, exactly as another owner's objects do."""

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.test import override_settings
from django.utils import timezone

from delivery.conf import public_url
from delivery.engine.accounts import tenancy
from delivery.engine.claiming import leases
from delivery.engine.intake import fanout
from delivery.engine.intake.publishing import Entry, message_publish_batch
from delivery.engine.state import health
from delivery.events import PublishError, publish
from delivery.models import Delivery, Message
from subscriptions.models import Endpoint, Subscription, Tenant, TenantKey
from tests.delivery.web.api.shop import key_client, receivers_of
from tests.delivery.web.api.shop import shop as shop_fixture
from tests.delivery.web.api.test_isolation import operations

pytestmark = pytest.mark.django_db
shop = shop_fixture


def test_a_message_reaches_its_audience_only(shop):
    api, orders = shop["api"], shop["orders"]

    def sent(body):
        response = api.post(f"/api/topics/{orders['id']}/publish/", {"payload": 1, **body}, format="json")
        assert response.status_code == 202, response.content
        return receivers_of(response.json()["message_id"])

    assert sent({"tenant": "acme"}) == {"acme", "own"}
    assert sent({"tenant": "globex"}) == {"globex", "own"}
    assert sent({}) == {"own"}  # no tenant: never a tenant's subscription
    assert sent({"broadcast": True}) == {"acme", "globex", "own"}
    stored = Message.objects.filter(tenant__external_id="acme").get()
    assert stored.tenant_id == shop["acme"]["tenant"]["id"] and not stored.broadcast
    # Delivery rows carry the tenant (fair claiming shares an owner's turn across its tenants)
    assert set(Delivery.objects.filter(message=stored).values_list("tenant__external_id", flat=True)) == {"acme", None}


def test_addressing_errors_are_400s_naming_the_field(shop, other_user):
    api, orders = shop["api"], shop["orders"]
    unknown = api.post(f"/api/topics/{orders['id']}/publish/", {"payload": 1, "tenant": "initech"}, format="json")
    assert unknown.status_code == 400 and "initech" in unknown.json()["tenant"][0]
    both = api.post(f"/api/topics/{orders['id']}/publish/", {"payload": 1, "tenant": "acme", "broadcast": True},
                    format="json")
    assert both.status_code == 400 and "broadcast" in both.json()
    bad = api.post(f"/api/topics/{orders['id']}/publish/", {"payload": 1, "tenant": "a b"}, format="json")
    assert bad.status_code == 400 and "tenant" in bad.json()
    # another owner's tenant of the same name is not Alice's
    Tenant.objects.create(owner=other_user, external_id="initech", name="Initech")
    again = api.post(f"/api/topics/{orders['id']}/publish/", {"payload": 1, "tenant": "initech"}, format="json")
    assert again.status_code == 400
    assert Message.objects.count() == 0


def test_a_batch_addresses_each_entry_and_refuses_an_unknown_tenant_alone(shop):
    api, orders = shop["api"], shop["orders"]
    response = api.post(f"/api/topics/{orders['id']}/publish-batch/", {"entries": [
        {"id": "a", "payload": 1, "tenant": "acme"}, {"id": "x", "payload": 2, "tenant": "nobody"},
        {"id": "g", "payload": 3, "tenant": "globex"}, {"id": "all", "payload": 4, "broadcast": True}]}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [f["id"] for f in body["failed"]] == ["x"] and "tenant" in body["failed"][0]["errors"]
    by_id = {s["id"]: receivers_of(s["message_id"]) for s in body["successful"]}
    assert by_id == {"a": {"acme", "own"}, "g": {"globex", "own"}, "all": {"acme", "globex", "own"}}


def test_python_publish_takes_a_tenant(shop, user):
    message = publish("orders", {"n": 1}, owner=user, tenant="globex")
    assert receivers_of(message.id) == {"globex", "own"}
    tenant = Tenant.objects.get(external_id="acme")
    assert receivers_of(publish("orders", 2, owner=user, tenant=tenant).id) == {"acme", "own"}
    with pytest.raises(PublishError, match="tenant"):
        publish("orders", 3, owner=user, tenant="nobody", unknown_tenant="refuse")


def test_fan_out_reads_the_owners_and_one_tenants_subscriptions(shop):
    orders = shop["orders"]["id"]
    acme = Tenant.objects.get(external_id="acme")
    read = fanout.topic_subscriptions(orders, fanout.Audience(acme.id))
    assert {c.tenant_id for c in read} == {None, acme.id} and len(read) == 2
    assert len(fanout.topic_subscriptions(orders)) == 1
    assert len(fanout.topic_subscriptions(orders, fanout.Audience(broadcast=True))) == 3


@pytest.fixture
def others(shop, django_user_model):
    """What acme's key must not reach: globex's objects, Alice's own objects (her subscription, endpoint, a message
    and its delivery for her own subscription), the closed topic, Alice's tenant records and catalog; and acme's own
    objects."""
    api = shop["api"]
    message = api.post(f"/api/topics/{shop['orders']['id']}/publish/", {"payload": 1, "broadcast": True},
                       format="json").json()["message_id"]
    closed_type = api.post("/api/event-types/", {"name": "internal.audit", "open_to_tenants": False},
                           format="json").json()
    open_type = api.post("/api/event-types/", {"name": "order.created"}, format="json").json()

    def objects(subscription):
        sub = Subscription.objects.get(id=subscription["id"])
        return {"subscriptions": sub.id, "endpoints": sub.endpoint_id,
                "deliveries": Delivery.objects.get(message_id=message, subscription=sub).id}

    own_orders = next(s for s in shop["own"] if s["topic"] == shop["orders"]["id"])
    return {
        "globex": {**objects(shop["globex"]["subscription"]), "tenants": shop["globex"]["tenant"]["id"]},
        "owner": {**objects(own_orders), "topics": shop["internal"]["id"], "messages": message,
                  "tenants": shop["acme"]["tenant"]["id"], "event-types": closed_type["id"]},
        "acme": {**objects(shop["acme"]["subscription"]), "topics": shop["orders"]["id"],
                 "event-types": open_type["id"]},
    }


# What a tenant key may do to its own objects (anything else: 404 even for its own).
TENANT_ROUTES = {
    "topics": {("get", "/api/topics/{id}/")},
    "event-types": {("get", "/api/event-types/{id}/"), ("get", "/api/event-types/{id}/versions/")},
    "endpoints": {("get", "/api/endpoints/{id}/"), ("post", "/api/endpoints/{id}/enable/")},
    "deliveries": {("get", "/api/deliveries/{id}/"), ("post", "/api/deliveries/{id}/retry/")},
    "subscriptions": {("get", "/api/subscriptions/{id}/"), ("patch", "/api/subscriptions/{id}/"),
                      ("delete", "/api/subscriptions/{id}/")} | {
        ("post", f"/api/subscriptions/{{id}}/{name}/") for name in (
            "confirm", "replay", "redrive", "recover", "pause", "resume", "rotate-secret", "resend-confirmation",
            "test", "transformation/test", "event-version/preview")} | {("get", "/api/subscriptions/{id}/metrics/"),
                                                ("get", "/api/subscriptions/{id}/dead-letters/")},
}


def test_the_404_matrix_of_a_tenant_key_on_every_route(shop, others):
    acme = shop["acme"]["client"]
    checked = 0
    for method, path in operations():
        if "{id}" not in path:
            continue
        resource = path.split("/")[2]
        for whose in ("globex", "owner", "acme"):
            if resource not in others[whose] or (whose, method) == ("acme", "delete"):
                continue  # (deleting its own subscription is the last step, below)
            url = path.replace("{id}", str(others[whose][resource]))
            response = getattr(acme, method)(url, {}, format="json")
            if whose == "acme" and (method, path) in TENANT_ROUTES.get(resource, set()):
                assert response.status_code != 404, (whose, method, url, response.content)
            else:
                assert response.status_code == 404, (whose, method, url, response.status_code)
            checked += 1
    assert checked >= 60
    mine = others["acme"]["subscriptions"]
    assert acme.delete(f"/api/subscriptions/{mine}/").status_code == 204
    assert not Subscription.objects.filter(id=mine).exists()


def test_every_route_without_an_id_is_closed_to_a_tenant_but_its_slice(shop, others):
    acme = shop["acme"]["client"]
    open_lists = {"/api/topics/", "/api/subscriptions/", "/api/endpoints/", "/api/deliveries/",
                  "/api/event-types/"}
    for method, path in operations():
        if "{" in path or path in ("/api/subscriptions/confirm/", "/api/schema/"):
            continue
        response = getattr(acme, method)(path, {}, format="json")
        if method == "get" and path in open_lists:
            assert response.status_code == 200, path
        elif method == "post" and path == "/api/subscriptions/":
            assert response.status_code == 400, path  # its own subscriptions: the body was empty
        else:
            assert response.status_code == 404, (method, path, response.status_code)


def test_a_tenants_lists_hold_its_own_objects_only(shop, others):
    acme = shop["acme"]["client"]
    assert [t["name"] for t in acme.get("/api/topics/").json()["results"]] == ["orders"]
    assert [s["id"] for s in acme.get("/api/subscriptions/").json()["results"]] == [others["acme"]["subscriptions"]]
    assert [e["id"] for e in acme.get("/api/endpoints/").json()["results"]] == [others["acme"]["endpoints"]]
    assert [d["id"] for d in acme.get("/api/deliveries/").json()["results"]] == [others["acme"]["deliveries"]]
    assert [t["name"] for t in acme.get("/api/event-types/").json()["results"]] == ["order.created"]
    # filters cannot name another's object either
    assert acme.get(f"/api/deliveries/?subscription={others['globex']['subscriptions']}").status_code == 400
    assert acme.get(f"/api/subscriptions/?topic={shop['internal']['id']}").status_code == 400


def test_a_tenant_cannot_subscribe_to_a_closed_topic(shop):
    acme = shop["acme"]["client"]
    for topic, answer in ((shop["internal"]["id"], "does not exist"), ("internal", "You have no topic named")):
        response = acme.post("/api/subscriptions/", {"topic": topic, "endpoint": "http://127.0.0.1:9/z"},
                             format="json")
        assert response.status_code == 400 and answer in str(response.json()["topic"]), response.content
    assert Subscription.objects.filter(tenant__external_id="acme").count() == 1


def test_same_url_two_tenants_two_health_records(shop):
    orders = shop["orders"]["id"]
    for name in ("acme", "globex"):
        response = shop[name]["client"].post("/api/subscriptions/", {
            "topic": orders, "endpoint": "http://127.0.0.1:9/shared", "event_types": ["order.created"]},
            format="json")
        assert response.status_code == 201, response.content
    shared = Endpoint.objects.filter(url="http://127.0.0.1:9/shared")
    assert shared.count() == 2 and {e.tenant.external_id for e in shared} == {"acme", "globex"}


@override_settings(HERALD_REQUIRE_CONFIRMATION=True)
def test_a_tenant_changing_its_endpoint_confirms_the_new_one(shop):
    acme, sub = shop["acme"]["client"], shop["acme"]["subscription"]
    changed = acme.patch(f"/api/subscriptions/{sub['id']}/", {"endpoint": "http://127.0.0.1:9/acme-new"},
                         format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["status"] == "pending_confirmation"
    moved = Subscription.objects.get(id=sub["id"])
    assert moved.endpoint.tenant.external_id == "acme" and moved.confirmation_send_at is not None


def test_keys_are_shown_once_hashed_at_rest_revocable_and_read_only_keys_only_read(shop):
    api, acme = shop["api"], shop["acme"]
    tenant_id, plaintext = acme["tenant"]["id"], acme["key"]
    stored = TenantKey.objects.get(tenant_id=tenant_id)
    assert stored.key_hash != plaintext and plaintext not in str(api.get(f"/api/tenants/{tenant_id}/keys/").json())
    reader = api.post(f"/api/tenants/{tenant_id}/keys/", {"read_only": True}, format="json").json()
    looking = key_client(reader["key"])
    assert looking.get("/api/subscriptions/").status_code == 200
    refused = looking.post(f"/api/subscriptions/{acme['subscription']['id']}/pause/")
    assert refused.status_code == 403
    revoked = api.post(f"/api/tenants/{tenant_id}/revoke-key/", {"key": stored.id}, format="json")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    assert acme["client"].get("/api/subscriptions/").status_code == 401
    assert key_client("htk_" + "x" * 43).get("/api/subscriptions/").status_code == 401
    # another owner cannot manage Alice's tenants
    assert shop["globex"]["client"].get(f"/api/tenants/{tenant_id}/keys/").status_code == 404


def test_tenant_quotas(shop):
    acme, orders = shop["acme"]["client"], shop["orders"]["id"]
    with override_settings(HERALD_MAX_ENDPOINTS_PER_TENANT=1):
        refused = acme.post("/api/subscriptions/", {"topic": orders, "endpoint": "http://127.0.0.1:9/second"},
                            format="json")
        assert refused.status_code == 400 and "HERALD_MAX_ENDPOINTS_PER_TENANT" in str(refused.json())
    with override_settings(HERALD_MAX_SUBSCRIPTIONS_PER_TENANT=1):
        refused = acme.post("/api/subscriptions/", {"topic": orders, "endpoint": "http://127.0.0.1:9/third"},
                            format="json")
        assert refused.status_code == 400 and "HERALD_MAX_SUBSCRIPTIONS_PER_TENANT" in str(refused.json())
    assert Subscription.objects.filter(tenant__external_id="acme").count() == 1
    sub = shop["acme"]["subscription"]["id"]
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    with override_settings(HERALD_MAX_REPLAYS_PER_TENANT_PER_HOUR=1):
        assert acme.post(f"/api/subscriptions/{sub}/replay/", {"since": since}, format="json").status_code == 202
        again = acme.post(f"/api/subscriptions/{sub}/replay/", {"since": since}, format="json")
        assert again.status_code == 429 and "HERALD_MAX_REPLAYS_PER_TENANT_PER_HOUR" in str(again.json())


def test_a_tenants_replay_holds_its_own_and_broadcast_messages_only(shop, user):
    for tenant in ("acme", "globex", None):
        publish("orders", {"for": tenant}, owner=user, tenant=tenant)
    publish("orders", {"for": "all"}, owner=user, broadcast=True)
    acme, sub = shop["acme"]["client"], shop["acme"]["subscription"]["id"]
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    replayed = acme.post(f"/api/subscriptions/{sub}/replay/", {"since": since}, format="json")
    assert replayed.status_code == 202, replayed.content
    payloads = {d.message.payload["for"] for d in Delivery.objects.filter(replay_id=replayed.json()["id"])}
    assert payloads == {"acme", "all"}


def test_a_test_event_goes_to_that_subscription_alone(shop):
    acme, sub = shop["acme"]["client"], shop["acme"]["subscription"]["id"]
    response = acme.post(f"/api/subscriptions/{sub}/test/")
    assert response.status_code == 202, response.content
    delivery = Delivery.objects.get(id=response.json()["id"])
    assert delivery.subscription_id == sub and delivery.message.event_type == "herald.test"
    assert Delivery.objects.filter(message=delivery.message).count() == 1
    with override_settings(HERALD_MAX_TEST_EVENTS_PER_HOUR=1):
        assert acme.post(f"/api/subscriptions/{sub}/test/").status_code == 429


def test_claims_share_an_owners_turn_across_its_tenants(shop, user):
    """One tenant's backlog of 300 does not stand before another tenant's fresh delivery of the same owner."""
    acme = Tenant.objects.get(external_id="acme")
    topic = Subscription.objects.get(id=shop["acme"]["subscription"]["id"]).topic
    message_publish_batch(topic=topic, entries=[Entry(payload=n, tenant_id=acme.id) for n in range(150)])
    publish("orders", "fresh", owner=user, tenant="globex")
    globex = Delivery.objects.get(tenant__external_id="globex").id
    claimed, more = leases.claim_due(timezone.now() + timedelta(seconds=1), 6, per_endpoint=32)
    assert globex in [d.id for d in claimed] and more


def test_portal_links_expire_and_cannot_be_forged(shop, client):
    tenant = Tenant.objects.get(external_id="acme")
    link = tenancy.portal_link(tenant, ttl=timedelta(minutes=5))
    page = client.get(link)
    assert page.status_code == 200 and "127.0.0.1:9/acme" in page.content.decode()
    assert "127.0.0.1:9/globex" not in page.content.decode() and "/own/" not in page.content.decode()
    assert page["Referrer-Policy"] == "no-referrer" and "frame-ancestors 'none'" in page["Content-Security-Policy"]
    old = tenancy.portal_link(tenant, ttl=timedelta(minutes=5), now=timezone.now() - timedelta(minutes=6))
    assert client.get(old).status_code == 403
    token = link.strip("/").split("/")[-1]
    assert client.get(link.replace(token, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))).status_code == 403
    with pytest.raises(Exception, match="seconds"):
        tenancy.portal_link(tenant, ttl=timedelta(days=30))


def test_owner_api_issues_portal_links_and_frames_them_where_asked(shop, client):
    api, tenant = shop["api"], shop["acme"]["tenant"]
    settings = api.patch("/api/portal/", {"name": "Alice's Shop", "colour": "#aa3300",
                                          "frame_ancestors": ["https://app.alice.example"]}, format="json")
    assert settings.status_code == 200, settings.content
    bad = api.patch("/api/portal/", {"frame_ancestors": ["https://x; script-src *"]}, format="json")
    assert bad.status_code == 400 and "frame_ancestors" in bad.json()
    link = api.post(f"/api/tenants/{tenant['id']}/portal-link/", {"ttl_seconds": 600, "read_only": True},
                    format="json")
    assert link.status_code == 201, link.content
    page = client.get(link.json()["url"])
    assert page.status_code == 200 and "Alice&#x27;s Shop" in page.content.decode()
    assert "frame-ancestors https://app.alice.example" in page["Content-Security-Policy"]
    path = urlsplit(link.json()["url"]).path
    sub = shop["acme"]["subscription"]["id"]
    assert client.post(f"{path}subscriptions/{sub}/pause/").status_code == 403  # read-only link
    assert Subscription.objects.get(id=sub).status == "confirmed"
    too_long = api.post(f"/api/tenants/{tenant['id']}/portal-link/", {"ttl_seconds": 10**9}, format="json")
    assert too_long.status_code == 400 and "ttl" in str(too_long.json())


def test_deleting_a_tenant_removes_its_subscriptions_and_keeps_the_owners_messages(shop, user):
    message = publish("orders", {"n": 1}, owner=user, tenant="acme")
    response = shop["api"].delete(f"/api/tenants/{shop['acme']['tenant']['id']}/")
    assert response.status_code == 204, response.content
    assert not Subscription.objects.filter(tenant__isnull=False, tenant__external_id="acme").exists()
    assert not Endpoint.objects.filter(url="http://127.0.0.1:9/acme").exists()
    kept = Message.objects.get(id=message.id)
    assert kept.tenant_id is None and receivers_of(kept.id) == {"own"}
    assert shop["acme"]["client"].get("/api/subscriptions/").status_code == 401  # its keys went with it


def test_operational_events_name_the_tenant(shop, user, settings, django_capture_on_commit_callbacks):
    settings.HERALD_OPERATIONAL_EVENTS_TOPIC = "herald-ops"
    settings.HERALD_OPERATIONAL_EVENTS_OWNER = user.username
    endpoint = Subscription.objects.get(id=shop["acme"]["subscription"]["id"]).endpoint
    with django_capture_on_commit_callbacks(execute=True):
        health.endpoint_freeze(endpoint=endpoint)
    event = Message.objects.get(topic__name="herald-ops", event_type="herald.endpoint.frozen")
    assert event.payload["tenant"] == {"external_id": "acme", "name": "Acme"}
    assert event.attributes["tenant"] == "acme"


def test_a_tenant_changes_its_url_in_the_portal(shop, client, settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True
    tenant = Tenant.objects.get(external_id="acme")
    sub = shop["acme"]["subscription"]["id"]
    base = tenancy.portal_link(tenant)
    moved = client.post(f"{base}subscriptions/{sub}/move/", {"url": "http://127.0.0.1:9/acme-moved"})
    assert moved.status_code == 302
    subscription = Subscription.objects.get(id=sub)
    assert subscription.endpoint.url == "http://127.0.0.1:9/acme-moved" and subscription.endpoint.tenant == tenant
    assert subscription.status == "pending_confirmation"
    refused = client.post(f"{base}subscriptions/{sub}/move/", {"url": "http://10.0.0.1/x"})
    assert refused.status_code == 400 and "private" in refused.content.decode().lower()
    assert client.post(f"{base}subscriptions/{shop['globex']['subscription']['id']}/pause/").status_code == 404


def test_one_tenants_replays_leave_the_others_and_the_owners_allowance_alone(shop, settings):
    settings.HERALD_MAX_REPLAYS_PER_TENANT_PER_HOUR = 1
    settings.HERALD_MAX_REPLAYS_PER_HOUR = 1
    since = (timezone.now() - timedelta(hours=1)).isoformat()

    def replay(client, subscription_id):
        return client.post(f"/api/subscriptions/{subscription_id}/replay/", {"since": since}, format="json")

    assert replay(shop["acme"]["client"], shop["acme"]["subscription"]["id"]).status_code == 202
    assert replay(shop["acme"]["client"], shop["acme"]["subscription"]["id"]).status_code == 429
    assert replay(shop["globex"]["client"], shop["globex"]["subscription"]["id"]).status_code == 202
    own = shop["own"][0]["id"]
    Subscription.objects.filter(id=own).update(status="confirmed")
    assert replay(shop["api"], own).status_code == 202


def test_a_tenant_chooses_other_event_types_in_the_portal(shop, client):
    api = shop["api"]
    for name in ("order.created", "order.shipped"):
        api.post("/api/event-types/", {"name": name}, format="json")
    tenant = Tenant.objects.get(external_id="acme")
    sub = shop["acme"]["subscription"]["id"]
    base = tenancy.portal_link(tenant)
    page = client.get(f"{base}subscriptions/{sub}/").content.decode()
    assert 'name="event_types" value="order.shipped"' in page
    assert client.post(f"{base}subscriptions/{sub}/types/", {"event_types": ["order.shipped"]}).status_code == 302
    assert Subscription.objects.get(id=sub).event_types == ["order.shipped"]
    refused = client.post(f"{base}subscriptions/{sub}/types/", {"event_types": ["internal.audit"]})
    assert refused.status_code == 400 and "catalog" in refused.content.decode()


def test_a_portal_link_is_the_same_full_url_from_python_and_from_the_api(shop, settings):
    """Both start with HERALD_PUBLIC_URL (a Python caller has no request to take a host from); a PUBLIC_URL that
    already ends in Herald's mount prefix is not doubled."""
    settings.HERALD_PUBLIC_URL = "https://webhooks.shop.example/"
    tenant = Tenant.objects.get(id=shop["acme"]["tenant"]["id"])
    answered = shop["api"].post(f"/api/tenants/{tenant.id}/portal-link/", {}, format="json").json()["url"]
    from_python = tenancy.portal_link(tenant)
    for url in (answered, from_python):
        assert url.startswith("https://webhooks.shop.example/portal/") and url.endswith("/")
    assert tenancy.portal_access(urlsplit(from_python).path.split("/")[-2])[0].tenant == tenant


def test_the_public_url_is_put_in_front_of_a_path_once():
    with override_settings(HERALD_PUBLIC_URL="https://shop.example/herald"):
        assert public_url("/herald/portal/t/") == "https://shop.example/herald/portal/t/"
        assert public_url("/heraldic/x/") == "https://shop.example/herald/heraldic/x/"
    with override_settings(HERALD_PUBLIC_URL="https://shop.example"):
        assert public_url("/herald/portal/t/") == "https://shop.example/herald/portal/t/"


def test_a_tenants_metrics_count_only_what_was_published_for_it(shop):
    """Acme's subscription's `published` counts Acme's messages and broadcasts, never Globex's volume; the owner's
    own subscription counts every message of the topic."""
    owner = Tenant.objects.get(external_id="acme").owner
    for tenant in ("acme", "globex", "globex", "globex"):
        publish("orders", {"n": 1}, owner=owner, tenant=tenant)
    publish("orders", {"n": 2}, owner=owner, broadcast=True)
    publish("orders", {"n": 3}, owner=owner)  # the owner's own subscriptions only
    acme = shop["acme"]["client"].get(f"/api/subscriptions/{shop['acme']['subscription']['id']}/metrics/").json()
    assert acme["published"] == 2 and acme["matched"] == 2
    own = next(s for s in shop["own"] if s["topic"] == shop["orders"]["id"])
    assert shop["api"].get(f"/api/subscriptions/{own['id']}/metrics/").json()["published"] == 6



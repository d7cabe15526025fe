"""A subscription's event versions and the preview of its upgrade, the same through every door
(delivery/web/version_previews.py): the latest delivered event of a type with versions, else the catalog's example
of the newest version, brought down to the version received now and to the one an upgrade would receive; a
converter that fails shown with its line; nothing sent or stored. (The doors' own tests: the API's test_views, the
console's test_subscriptions, the portal's test_pages and test_actions.)"""

import pytest

from delivery.engine.accounts import tenancy
from delivery.engine.accounts.event_types import event_type_create, event_version_create
from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.plumbing.errors import ApplicationError
from delivery.events import publish
from delivery.models import Attempt, Delivery
from delivery.web.version_previews import NOTHING, Received, newest, preview, received, version_names

pytestmark = pytest.mark.django_db
TO_JANUARY = "function handler(w) {\n  w.payload = {name: w.payload.full_name};\n  return w;\n}"
BROKEN = "function handler(w) {\n  w.payload = w.payload.customer.full_name;\n  return w;\n}"


@pytest.fixture
def shop(user, redis_conn):
    """customer.created with a January version ({name}), a topic, and a subscription made then (pinned to it)."""
    customer = event_type_create(owner=user, name="customer.created")
    event_version_create(event_type=customer, name="2026-01-01", example={"name": "Ada"})
    topic, _ = topic_create(owner=user, name="customers", open_to_tenants=True)
    subscription, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/customers")
    return {"customer": customer, "topic": topic, "subscription": subscription}


def june(shop, down_converter=TO_JANUARY, example=None):
    """The June version, where `name` became `full_name`."""
    event_version_create(event_type=shop["customer"], name="2026-06-01", down_converter=down_converter,
                         example=example)


def test_the_latest_event_as_received_now_and_after_the_upgrade_sending_nothing(shop):
    june(shop)
    message = publish(shop["topic"], {"full_name": "Grace Hopper"}, event_type="customer.created")
    publish(shop["topic"], {"x": 1}, event_type="shop.opened")  # later, but of a type without versions
    assert preview(shop["subscription"], "2026-06-01") == {
        "event_type": "customer.created", "message": str(message.id),
        "current": {"version": "2026-01-01", "payload": {"name": "Grace Hopper"}},
        "upgraded": {"version": "2026-06-01", "payload": {"full_name": "Grace Hopper"}}}
    assert Delivery.objects.count() == 2 and not Attempt.objects.exists()  # nothing sent


def test_without_an_event_the_example_of_the_newest_version(shop):
    june(shop, example={"full_name": "Ada Lovelace"})
    assert preview(shop["subscription"], "") == {  # "": the latest
        "event_type": "customer.created", "message": None,
        "current": {"version": "2026-01-01", "payload": {"name": "Ada Lovelace"}},
        "upgraded": {"version": "2026-06-01", "payload": {"full_name": "Ada Lovelace"}}}


def test_a_converter_that_fails_is_shown_with_its_line_in_place_of_the_payload(shop):
    june(shop, down_converter=BROKEN, example={"full_name": "Ada"})
    shown = preview(shop["subscription"], "2026-06-01")
    assert shown["current"] == {"version": "2026-01-01", "line": 2, "error": (
        "down-converter of 2026-06-01: TypeError: Cannot read properties of undefined (reading 'full_name')")}
    assert shown["upgraded"] == {"version": "2026-06-01", "payload": {"full_name": "Ada"}}


def test_an_event_published_in_an_older_version_is_shown_as_published(shop):
    june(shop)
    publish(shop["topic"], {"name": "Ada"}, event_type="customer.created", event_version="2026-01-01")
    shown = preview(shop["subscription"], "2026-06-01")
    assert (shown["current"], shown["upgraded"]) == ({"version": "2026-01-01", "payload": {"name": "Ada"}},) * 2


def test_a_version_the_catalog_lacks_and_nothing_to_preview_are_400s_on_event_version(shop, user):
    with pytest.raises(ApplicationError) as refused:
        preview(shop["subscription"], "2030-01-01")
    assert refused.value.field == "event_version" and "is not a version" in refused.value.message
    orders = event_type_create(owner=user, name="order.created")
    event_version_create(event_type=orders, name="2026-01-01")  # no example
    topic, _ = topic_create(owner=user, name="orders")
    subscription, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/orders",
                                          event_types=["order.created"])
    with pytest.raises(ApplicationError) as refused:
        preview(subscription, "2026-01-01")
    assert (refused.value.field, refused.value.message) == ("event_version", NOTHING)


def test_what_a_subscription_receives_of_each_type_and_where_an_upgrade_goes(shop, user):
    june(shop)
    audit = event_type_create(owner=user, name="audit.logged", open_to_tenants=False)
    event_version_create(event_type=audit, name="2025-03-01")
    assert received(shop["subscription"]) == [  # all types: by name
        Received("audit.logged", "2025-03-01", "2025-03-01"), Received("customer.created", "2026-01-01", "2026-06-01")]
    assert [each.behind for each in received(shop["subscription"])] == [False, True]
    assert newest(shop["subscription"]) == "2026-06-01"
    assert version_names(user.id) == ["2026-06-01", "2026-01-01", "2025-03-01"]

    acme, _ = tenancy.tenant_create(owner=user, external_id="acme")
    acmes, _ = subscription_create(topic=shop["topic"], endpoint="http://127.0.0.1:9/acme", tenant=acme,
                                   event_types=["customer.created"])
    assert received(acmes) == [Received("customer.created", "2026-06-01", "2026-06-01")]  # made after June
    chosen, _ = subscription_create(topic=shop["topic"], endpoint="http://127.0.0.1:9/chosen",
                                    event_types=["audit.*"], event_version="2026-01-01")
    assert received(chosen) == [Received("audit.logged", "2025-03-01", "2025-03-01")]
    assert newest(chosen) == "2025-03-01"

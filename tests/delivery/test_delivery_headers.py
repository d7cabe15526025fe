"""Delivery headers: static, secret (encrypted, never shown again, never recorded) or from the message's
attributes; Herald's own headers cannot be overridden."""

import pytest
from django.db import connection

from delivery.engine.accounts import subscribing
from delivery.engine.accounts.subscribing import subscription_create, topic_create
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Attempt
from delivery.rules.delivery_headers import HeaderError, resolve, shown, validate
from subscriptions.models import Subscription
from subscriptions.secrets import PREFIX, decrypt
from tests.conftest import settle

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "sk_live_51Hc0nfidential"


@pytest.mark.parametrize("headers, named", [
    ("X-A: 1", "must be a list"),
    ([{"name": f"X-{n}", "value": "v"} for n in range(11)], "at most 10"),
    ([{"name": "X A", "value": "v"}], "[0].name: must be a header name"),
    ([{"name": "Content-Type", "value": "text/plain"}], "[0].name: Content-Type is set by Herald"),
    ([{"name": "X-Ok", "value": "1"}, {"name": "webhook-signature", "value": "v1,x"}], "[1].name: webhook-signature"),
    ([{"name": "ce-type", "value": "x"}], "ce-type is set by Herald"),
    ([{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "2"}], "[1].name: x-a is given twice"),
    ([{"name": "X-A", "value": "1\r\nX-Injected: yes"}], "[0].value: must be 1 to 4096 visible ASCII"),
    ([{"name": "X-A", "value": "é"}], "[0].value"),
    ([{"name": "X-A", "value": "x" * 4097}], "[0].value"),
    ([{"name": "X-A"}], "[0]: give a value or from_attribute"),
    ([{"name": "X-A", "secret": True}], "[0]: give a value or from_attribute"),  # nothing stored to keep
    ([{"name": "X-A", "value": "1", "from_attribute": "a"}], "not both"),
    ([{"name": "X-A", "from_attribute": "a", "secret": True}], "not both"),
    ([{"name": "X-A", "value": "1", "colour": "red"}], "[0]: unknown field(s) colour"),
    ([{"name": "X-A", "value": "1", "secret": "yes"}], "[0].secret: must be true or false"),
])
def test_invalid_headers_name_the_entry(headers, named):
    with pytest.raises(HeaderError) as caught:
        validate(headers)
    assert named in str(caught.value)


def test_authorization_is_allowed_unless_oauth_sets_it():
    assert validate([{"name": "Authorization", "value": "ApiKey abc", "secret": True}])[0]["secret"] is True
    with pytest.raises(HeaderError, match="Authorization is set by Herald"):
        validate([{"name": "Authorization", "value": "ApiKey abc"}], oauth=True)


def test_a_secret_may_be_kept_and_is_never_shown():
    checked = validate([{"name": "X-Key", "secret": True}, {"name": "X-Env", "value": "prod"}],
                       kept_secrets={"x-key"})
    assert checked == [{"name": "X-Key", "value": None, "secret": True},
                       {"name": "X-Env", "value": "prod", "secret": False}]
    assert shown([{"name": "X-Key", "value": "fernet:abc", "secret": True}]) == [
        {"name": "X-Key", "value": None, "secret": True}]


def test_attribute_headers_take_what_can_be_a_header_and_leave_out_the_rest():
    headers = [{"name": "X-Tenant", "from_attribute": "tenant"}, {"name": "X-Size", "from_attribute": "size"},
               {"name": "X-Evil", "from_attribute": "evil"}, {"name": "X-Missing", "from_attribute": "nope"},
               {"name": "X-Static", "value": "v1"}]
    resolved = resolve(headers, {"tenant": "acme", "size": 3, "evil": "a\r\nX-Injected: 1"})
    assert resolved == {"X-Tenant": "acme", "X-Size": "3", "X-Static": "v1"}


def test_headers_reach_the_endpoint_and_secrets_stay_secret(api, receiver, redis_conn):
    topic = api.post("/api/topics/", {"name": "billing"}, format="json").json()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url, "delivery_headers": [
        {"name": "X-Api-Key", "value": SECRET, "secret": True},
        {"name": "X-Tenant", "from_attribute": "tenant"},
        {"name": "X-Route", "value": "eu-1"}]}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["delivery_headers"] == [
        {"name": "X-Api-Key", "value": None, "secret": True}, {"name": "X-Tenant", "from_attribute": "tenant"},
        {"name": "X-Route", "value": "eu-1", "secret": False}]
    assert SECRET not in created.content.decode()
    subscription_id = created.json()["id"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT delivery_headers::text FROM herald_subscriptions_subscription WHERE id = %s",
                       [subscription_id])
        assert SECRET not in cursor.fetchone()[0]

    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1, "attributes": {"tenant": "acme"}}, format="json")
    settle()
    request = receiver.requests[-1]
    assert request.headers["x-api-key"] == SECRET
    assert request.headers["x-tenant"] == "acme" and request.headers["x-route"] == "eu-1"
    recorded = Attempt.objects.get().request_headers
    assert recorded["X-Api-Key"] == "(secret)" and recorded["X-Tenant"] == "acme"
    assert SECRET not in api.get(f"/api/subscriptions/{subscription_id}/").content.decode()

    # a PATCH keeps the secret by naming it without a value, and changes the rest
    changed = api.patch(f"/api/subscriptions/{subscription_id}/", {"delivery_headers": [
        {"name": "X-Api-Key", "secret": True}, {"name": "X-Route", "value": "eu-2"}]}, format="json")
    assert changed.status_code == 200, changed.content
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 2, "attributes": {"tenant": "acme"}}, format="json")
    settle()
    request = receiver.requests[-1]
    assert request.headers["x-api-key"] == SECRET and request.headers["x-route"] == "eu-2"
    assert "x-tenant" not in request.headers


def test_bad_headers_answer_400_and_change_nothing(api, receiver):
    topic = api.post("/api/topics/", {"name": "billing"}, format="json").json()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                               "delivery_headers": [{"name": "X-A", "value": "1"}]}, format="json")
    response = api.patch(f"/api/subscriptions/{created.json()['id']}/", {"delivery_headers": [
        {"name": "X-B", "value": "2"}, {"name": "Host", "value": "evil.example"}]}, format="json")
    assert response.status_code == 400
    assert response.json()["delivery_headers"] == ["[1].name: Host is set by Herald and cannot be given"]
    assert api.get(f"/api/subscriptions/{created.json()['id']}/").json()["delivery_headers"] == [
        {"name": "X-A", "value": "1", "secret": False}]


def test_a_python_caller_gets_the_apis_checks_and_encryption(user):
    """subscription_create and subscription_update store delivery headers, certificates and token URLs through the
    same checks as the API (subscribing.checked_options): a secret value is encrypted at rest, a bad header is a
    400 naming the field, and nothing is written."""
    topic, _ = topic_create(owner=user, name="orders")
    subscription, _ = subscription_create(topic=topic, endpoint="http://127.0.0.1:9/h", delivery_headers=[
        {"name": "X-Api-Key", "value": "s3cret-value", "secret": True}])
    stored = subscription.delivery_headers[0]["value"]
    assert stored.startswith(PREFIX) and decrypt(stored) == "s3cret-value"
    with pytest.raises(ApplicationError) as refused:
        subscribing.subscription_update(subscription=subscription,
                                        delivery_headers=[{"name": "Bad Name", "value": "x"}])
    assert list(refused.value.as_payload()) == ["delivery_headers"]
    with pytest.raises(ApplicationError) as refused:
        subscription_create(topic=topic, endpoint="http://127.0.0.1:9/other", client_certificate="not a PEM",
                            client_key="")
    assert list(refused.value.as_payload())[0] in ("client_certificate", "client_key")
    assert Subscription.objects.count() == 1

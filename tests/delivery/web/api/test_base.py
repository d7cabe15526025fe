"""What every API view shares (delivery/web/api/base.py): its authentication, permissions, parser, pagination and
schema are set on the views, so a host project's own DRF settings change none of them; a tenant's key reaches only
the actions opened to tenants, and a read-only key only reads; `extend_schema` records the query parameters a
handler takes and whether it answers a page."""

import json

import pytest
from drf_spectacular.utils import OpenApiParameter
from rest_framework.settings import api_settings
from rest_framework.test import APIClient

from delivery.web.api.base import extend_schema
from delivery.web.api.messages import MessageViewSet
from delivery.web.api.subscriptions.views import SubscriptionViewSet
from delivery.web.api.topics import TopicViewSet
from subscriptions.models import Subscription, Topic
from tests.delivery.web.api.calls import create_topic
from tests.delivery.web.api.shop import key_client
from tests.delivery.web.api.shop import shop as shop_fixture

pytestmark = pytest.mark.django_db
shop = shop_fixture
HOST_PROJECT_DRF = {  # a host project's settings, each different from what Herald's views use
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.FormParser"],
    "DEFAULT_PAGINATION_CLASS": None,
    "DEFAULT_FILTER_BACKENDS": [],
    "DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "rest_framework.views.exception_handler",
}


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_a_host_projects_drf_settings_change_nothing_of_the_api(api, settings):
    served = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content
    create_topic(api, "first")
    settings.REST_FRAMEWORK = HOST_PROJECT_DRF
    assert api_settings.DEFAULT_PAGINATION_CLASS is None and api_settings.DEFAULT_AUTHENTICATION_CLASSES == []
    assert APIClient().get("/api/topics/").json() == {"detail": (
        "Authentication credentials were not provided. Send your API token as 'Authorization: Token <key>' "
        "(or 'Bearer <key>').")}
    assert api.post("/api/topics/", {"name": "second"}, format="json").status_code == 201  # JSON still read
    listed = api.get("/api/topics/", {"name": "second", "limit": 1}).json()
    assert (list(listed), listed["count"], [t["name"] for t in listed["results"]]) == (
        ["count", "next", "previous", "results"], 1, ["second"])
    assert json.loads(APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content) == \
        json.loads(served)


def test_a_tenants_key_reaches_only_the_actions_opened_to_tenants(shop):
    acme = shop["acme"]["client"]
    assert acme.get(f"/api/topics/{shop['orders']['id']}/").status_code == 200  # retrieve: open to tenants
    for answer in (acme.post("/api/topics/", {"name": "theirs"}, format="json"),
                   acme.post(f"/api/topics/{shop['orders']['id']}/publish/", {"payload": 1}, format="json"),
                   acme.get("/api/tenants/")):
        assert (answer.status_code, answer.json()) == (404, {"detail": "Not found."})
    assert not Topic.objects.filter(name="theirs").exists()


def test_a_read_only_key_reads_and_changes_nothing(shop):
    api, acme = shop["api"], shop["acme"]
    key = api.post(f"/api/tenants/{acme['tenant']['id']}/keys/", {"name": "dashboard", "read_only": True},
                   format="json").json()["key"]
    reader = key_client(key)
    url = f"/api/subscriptions/{acme['subscription']['id']}/"
    assert reader.get(url).json()["id"] == acme["subscription"]["id"]
    for answer in (reader.patch(url, {"filter_policy": {"kind": ["a"]}}, format="json"), reader.post(url + "pause/"),
                   reader.delete(url)):
        assert (answer.status_code, answer.json()) == (403, {"detail": "This key is read-only."})
    stored = Subscription.objects.get(id=acme["subscription"]["id"])
    assert (stored.status, stored.filter_policy) == ("confirmed", None)


def test_extend_schema_records_the_query_parameters_a_handler_takes():
    assert TopicViewSet.metrics.query_parameters == frozenset({"window"})
    assert TopicViewSet.metrics.answers_a_page is False
    assert MessageViewSet.fanout.query_parameters == frozenset({"outcome", "subscription", "limit", "offset"})
    assert MessageViewSet.fanout.answers_a_page is True
    assert SubscriptionViewSet.dead_letters.query_parameters == frozenset({"limit", "offset"})
    assert TopicViewSet.publish.query_parameters == frozenset()  # its parameter is a header

    @extend_schema(parameters=[OpenApiParameter("since", str), OpenApiParameter("X-Trace", str,
                                                                                OpenApiParameter.HEADER)])
    def handler(self, request):
        """A handler."""

    assert (handler.query_parameters, handler.answers_a_page) == (frozenset({"since"}), False)

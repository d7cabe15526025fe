"""The API's error shapes (delivery/web/api/errors.py): a service's refusal as `{"detail": …}` or `{field: [...]}`
with its status and Retry-After; an invalid policy under `delivery_policy`; a form instead of JSON a 415 that says
what to send; an anonymous request a 401 that says how to authenticate; Redis or the database away a 503 that says
nothing was changed; a body over the limit a 413; Django's validation errors DRF's 400."""

import pytest
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework.exceptions import NotFound
from rest_framework.test import APIClient, APIRequestFactory

from delivery.engine.plumbing.errors import ApplicationError
from delivery.web.api.errors import api_exception_handler
from subscriptions.models import Topic
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db
REDIS_AWAY = {"detail": "Redis is unavailable; nothing was changed. Try again shortly."}
DATABASE_AWAY = {"detail": "The database is unavailable; nothing was changed. Try again shortly."}


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def handled(exc):
    """What the handler answers for `exc` raised by a view: (status, body, Retry-After or None)."""
    response = api_exception_handler(exc, {"request": APIRequestFactory().get("/api/topics/"), "view": None})
    return response.status_code, response.data, response.get("Retry-After")


def test_a_services_refusal_keeps_its_status_and_retry_after(api, settings):
    settings.HERALD_MAX_TEST_EVENTS_PER_HOUR = 1
    topic = create_topic(api)
    subscription = create_subscription(api, topic["id"])
    url = f"/api/subscriptions/{subscription['id']}/test/"
    assert api.post(url).status_code == 202
    refused = api.post(url)
    assert (refused.status_code, refused["Retry-After"], refused.json()) == (429, "600", {
        "detail": "1 test events were sent to this subscription in the last hour, the most one may get "
                  "(HERALD_MAX_TEST_EVENTS_PER_HOUR); try again later."})


def test_a_refusal_that_names_a_field_is_shown_under_it():
    assert handled(ApplicationError("must be later than since", field="until")) == (
        400, {"until": ["must be later than since"]}, None)
    assert handled(ApplicationError.of_problems({"a": "first", "b": "second"})) == (
        400, {"a": ["first"], "b": ["second"]}, None)
    assert handled(ApplicationError("busy", status_code=409)) == (409, {"detail": "busy"}, None)


def test_an_invalid_policy_is_named_field_by_field_under_delivery_policy(api):
    answer = api.post("/api/policies/preview/", {"delivery_policy": {"jitter": 3}}, format="json")
    assert (answer.status_code, answer.json()) == (400, {"delivery_policy": {"jitter": ["must be at most 0.5"]}})


def test_a_form_instead_of_json_is_a_415_that_says_what_to_send(api):
    answer = api.generic("POST", "/api/topics/", "name=orders", content_type="application/x-www-form-urlencoded")
    assert (answer.status_code, answer.json()) == (415, {"detail": (
        "Send the body as JSON with 'Content-Type: application/json' (this request's Content-Type is "
        "'application/x-www-form-urlencoded'; curl -d without -H 'Content-Type: application/json' sends a form).")})
    assert not Topic.objects.exists()


def test_an_anonymous_request_is_told_how_to_authenticate():
    answer = APIClient().get("/api/topics/")
    assert (answer.status_code, answer.json()) == (401, {"detail": (
        "Authentication credentials were not provided. Send your API token as 'Authorization: Token <key>' "
        "(or 'Bearer <key>').")})


def test_redis_or_the_database_away_is_a_503_to_try_again():
    for exc in (RedisConnectionError("refused"), RedisTimeoutError("slow")):
        assert handled(exc) == (503, REDIS_AWAY, "5")
    for exc in (OperationalError("server closed the connection"), InterfaceError("connection already closed")):
        assert handled(exc) == (503, DATABASE_AWAY, "5")


def test_a_body_over_djangos_limit_is_a_413_naming_it(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert handled(RequestDataTooBig("too big")) == (413, {"detail": "The request body is larger than 1000 bytes."},
                                                     None)


def test_djangos_validation_errors_are_drfs_400():
    assert handled(DjangoValidationError({"name": ["taken"], "colour": ["not a colour"]})) == (
        400, {"name": ["taken"], "colour": ["not a colour"]}, None)
    assert handled(DjangoValidationError(["first", "second"])) == (400, ["first", "second"], None)


def test_other_api_errors_are_drfs_own_and_a_bug_is_left_to_django():
    assert handled(NotFound("You have no topic with the id or name 'x'.")) == (
        404, {"detail": "You have no topic with the id or name 'x'."}, None)
    context = {"request": APIRequestFactory().get("/api/topics/"), "view": None}
    assert api_exception_handler(ValueError("a bug"), context) is None  # re-raised: Django's 500 and its log

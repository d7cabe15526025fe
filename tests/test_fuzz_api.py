"""Schemathesis against the OpenAPI schema: no route answers 5xx to anything the schema allows (bounded run)."""

import os

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error

from project.wsgi import application

DEEP = os.environ.get("HERALD_FUZZ_EXAMPLES")
EXAMPLES = int(DEEP or 25)
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


@pytest.fixture
def token(db, django_user_model, redis_conn):
    # Requests go through the real WSGI handler; like Django's test client, keep its request signals from closing
    # the connection that holds this test's transaction.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    user = django_user_model.objects.create_user("fuzzer", password="pw-fuzzer-123")
    yield Token.objects.create(user=user).key
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
# Derandomized so CI runs the same examples every time; HERALD_FUZZ_EXAMPLES=500 explores further, at random.
@settings(max_examples=EXAMPLES, derandomize=DEEP is None, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case, token):
    case.call_and_validate(headers={"Authorization": f"Token {token}", "Host": "localhost"},
                           checks=[not_a_server_error])

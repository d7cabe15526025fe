"""Who may ask: anonymous requests get a 401 that says how to authenticate; a browser is offered a login."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_anonymous_requests_get_401():
    client = APIClient()
    for path in ["/api/topics/", "/api/subscriptions/", "/api/messages/", "/api/deliveries/", "/api/endpoints/"]:
        response = client.get(path)
        assert response.status_code == 401, path
        assert "WWW-Authenticate" in response


def test_a_browser_that_is_not_logged_in_is_offered_a_login(user):
    page = APIClient().get("/api/", HTTP_ACCEPT="text/html")
    assert page.status_code == 401
    assert '<a id="herald-login" href="/admin/login/?next=/api/">Log in</a>' in page.content.decode()
    logged_in = Client()
    logged_in.force_login(user)
    assert 'id="herald-login"' not in logged_in.get("/api/", HTTP_ACCEPT="text/html").content.decode()

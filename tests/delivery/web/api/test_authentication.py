"""Who may ask: anonymous requests get a 401 that says how to authenticate; a browser is offered a login."""

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from subscriptions.models import Topic

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


def test_a_token_authenticates_its_user_until_it_is_deleted_or_the_user_deactivated(django_user_model):
    """The token lookup (one statement compiled per process, selectors.TOKEN): the key's own user, and the
    answers DRF gives for a key that is gone and for a user who may no longer log in, on the next request."""
    user = django_user_model.objects.create_user("keyholder")
    django_user_model.objects.create_user("bystander")
    token = Token.objects.create(user=user)
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    created = client.post("/api/topics/", {"name": "mine"}, format="json")
    assert created.status_code == 201 and Topic.objects.get(name="mine").owner_id == user.id
    user.is_active = False
    user.save()
    refused = client.get("/api/topics/")
    assert (refused.status_code, refused.json()["detail"]) == (401, "User inactive or deleted.")
    user.is_active = True
    user.save()
    assert client.get("/api/topics/").status_code == 200
    token.delete()
    gone = client.get("/api/topics/")
    assert (gone.status_code, gone.json()["detail"]) == (401, "Invalid token.")

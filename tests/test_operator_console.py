"""The operator's first hour in the API: the schedule a policy preview says ends it, offline API docs, a browsable
API that lists and documents every resource, and errors that say what to do. (The console's pages are tested beside
their modules, in tests/delivery/web/console/.)"""

import re

import pytest
from django.contrib.staticfiles import finders
from rest_framework.authtoken.models import Token

from delivery import VERSION
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_policy_preview_says_what_ends_the_schedule(api):
    preview = api.post("/api/policies/preview/", {"delivery_policy": "event-grid"}, format="json").json()
    assert preview["max_attempts"] == 30 and len(preview["schedule"]) == 11
    assert preview["ends"] == ("ends after attempt 11 (of at most 30): attempt 12 would come after the time-to-live "
                               "of 86400 s")
    workfront = api.post("/api/policies/preview/", {"delivery_policy": "workfront"}, format="json").json()
    assert workfront["ends"] == "ends after attempt 12: the maximum of 12 attempts"


def test_api_docs_are_served_from_static_files(client):
    for path in ("/api/docs/", "/api/redoc/"):
        page = client.get(path).content.decode()
        assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', page)
        assert assets, page
        assert not re.search(r"https?://", " ".join(assets)), assets
        for asset in assets:
            if asset == "/api/redoc/redoc.standalone.js":  # Herald's copy of ReDoc's bundle, its logo inlined
                bundle = client.get(asset)
                assert bundle.status_code == 200 and bundle["Content-Type"].startswith("application/javascript")
                assert b"cdn.redoc.ly" not in bundle.content and len(bundle.content) > 100_000
                continue
            assert asset.startswith("/static/drf_spectacular_sidecar/"), asset
            assert finders.find(asset.removeprefix("/static/")), asset
        assert "cdn.jsdelivr" not in page and "unpkg" not in page


def test_api_root_lists_every_resource(api):
    root = api.get("/api/").json()
    assert root.pop("version") == VERSION  # which Herald answers
    assert set(root) == {"topics", "subscriptions", "endpoints", "messages", "deliveries", "tenants", "event-types",
                         "portal", "policies/preview", "schema", "docs", "redoc"}
    for url in root.values():
        assert api.get(url).status_code in (200, 405), url  # the preview takes POST


def test_action_pages_show_their_own_request_forms(api):
    topic = api.post("/api/topics/", {"name": "forms"}, format="json").json()
    page = api.get(f"/api/topics/{topic['id']}/publish/", HTTP_ACCEPT="text/html").content.decode()
    form = page.split('id="post-generic-content-form"')[1]
    assert "&quot;payload&quot;" in form and "&quot;attributes&quot;" in form and "&quot;description&quot;" not in form
    batch = api.get(f"/api/topics/{topic['id']}/publish-batch/", HTTP_ACCEPT="text/html").content.decode()
    assert "&quot;entries&quot;" in batch.split('id="post-generic-content-form"')[1]
    preview = api.get("/api/policies/preview/", HTTP_ACCEPT="text/html").content.decode()
    assert "&quot;delivery_policy&quot;" in preview.split('id="post-generic-content-form"')[1]


def test_authentication_and_content_type_errors_say_what_to_do(user, client):

    token = Token.objects.create(user=user)
    assert client.get("/api/topics/", HTTP_AUTHORIZATION=f"Bearer {token.key}").status_code == 200
    assert client.get("/api/topics/", HTTP_AUTHORIZATION=f"Token {token.key}").status_code == 200
    missing = client.get("/api/topics/")
    assert missing.status_code == 401 and "Authorization: Token <key>" in missing.json()["detail"]
    basic = client.get("/api/topics/", HTTP_AUTHORIZATION="Basic YWRtaW46eA==")
    assert basic.status_code == 401 and "Unsupported authorization scheme 'Basic'" in basic.json()["detail"]
    wrong = client.get("/api/topics/", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and wrong.json()["detail"] == "Invalid token."

    # `curl -d '{"name": "x"}'` without a Content-Type sends a form.
    api = client_for(user)
    form = api.generic("POST", "/api/topics/", '{"name": "x"}', content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415
    assert "Content-Type: application/json" in form.json()["detail"]
    assert "application/x-www-form-urlencoded" in form.json()["detail"]

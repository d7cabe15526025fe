"""No name lookup inside a web request (issue #54): a tenant's slow name server cannot hold a web worker that every
owner shares. Endpoint names are checked at send time, after every lookup; at subscribe time only what a URL says by
itself is checked (IP literals in any spelling, and `localhost`)."""

import socket

import pytest

from subscriptions.models import Subscription

REAL_GETADDRINFO = socket.getaddrinfo


@pytest.fixture
def lookups(monkeypatch):
    """Names of `.slow.test` are looked up by a name server that never answers in time: the test fails if any is."""
    asked = []

    def getaddrinfo(host, port, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".slow.test"):
            asked.append(host)
            raise AssertionError(f"{host} was looked up inside a web request")
        return REAL_GETADDRINFO(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


@pytest.mark.django_db
def test_subscribing_and_changing_an_endpoint_look_up_no_name(api, lookups):
    topic = api.post("/api/topics/", {"name": "names"}, format="json").json()
    created = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": "https://a.slow.test/hook",
                                               "oauth_token_url": "https://auth.slow.test/token",
                                               "oauth_client_id": "c", "oauth_client_secret": "s"}, format="json")
    assert created.status_code == 201, created.content
    changed = api.patch(f"/api/subscriptions/{created.json()['id']}/", {"endpoint": "https://b.slow.test/hook"},
                        format="json")
    assert changed.status_code == 200, changed.content
    assert lookups == []
    assert Subscription.objects.get().endpoint.url == "https://b.slow.test/hook"


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://localhost:8000/", "http://LOCALHOST./x", "http://api.localhost/",
                                 "http://2130706433/"])
def test_names_that_always_mean_this_machine_are_still_refused_at_subscribe_time(api, settings, lookups, url):
    settings.HERALD_ALLOWED_NETWORKS = []
    topic = api.post("/api/topics/", {"name": "names"}, format="json").json()
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url}, format="json")
    assert response.status_code == 400
    assert "loopback" in response.json()["endpoint"][0]


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://①②⑦.0.0.1:8000/", "http://１２７.０.０.１/", "http://127。0。0。1/",
                                 "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:9000/"])
def test_addresses_spelled_in_other_digits_are_stored_as_they_are_read_and_refused(api, settings, url):
    settings.HERALD_ALLOWED_NETWORKS = []
    topic = api.post("/api/topics/", {"name": "names"}, format="json").json()
    response = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url}, format="json")
    assert response.status_code == 400 and "loopback" in response.json()["endpoint"][0]
    settings.HERALD_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    stored = api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": url}, format="json").json()
    assert stored["endpoint"].startswith(("http://127.0.0.1", "http://localhost"))

"""OAuth2 client credentials: Herald obtains a bearer token from a local token endpoint, caches it (one fetch per
token across workers, refreshed before it expires), sends it, and after a 401 renews it once within the same
attempt. The token URL passes the address guard; no token or client secret is recorded or shown."""

import threading
import time
from urllib.parse import parse_qs

import pytest

from delivery.engine.sending import oauth
from delivery.models import Attempt, Delivery
from subscriptions.models import Subscription
from tests.conftest import drain, publish, wait_until
from tests.delivery.web.api.test_secrets_at_rest import dump
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)
CLIENT_SECRET = "client-secret-value-7f3a"


class Authority:
    """A token endpoint (/token) and a protected hook (/hook) on one receiver."""

    def __init__(self, lifetime=3600):
        self.issued: list[str] = []
        self.valid: set[str] = set()
        self.lifetime = lifetime
        self.lock = threading.Lock()

    def reply(self, request):
        if request.path.endswith("/token"):
            form = parse_qs(request.body.decode())
            if form.get("client_secret") != [CLIENT_SECRET] or form.get("grant_type") != ["client_credentials"]:
                return Reply(status=401, body=b'{"error":"invalid_client"}')
            with self.lock:
                token = f"token-{len(self.issued) + 1}"
                self.issued.append(token)
                self.valid = {token}
            time.sleep(0.05)  # a slow authority: concurrent askers would all fetch if nothing coordinated them
            return Reply(body=f'{{"access_token": "{token}", "expires_in": {self.lifetime}}}'.encode(),
                         headers={"Content-Type": "application/json"})
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        return Reply(status=200 if bearer in self.valid else 401)


def subscribe_with_oauth(api, receiver, **extra):
    api.post("/api/topics/", {"name": "secured"}, format="json")
    response = api.post("/api/subscriptions/", {
        "topic": "secured", "endpoint": receiver.url, "oauth_token_url": receiver.url + "/token",
        "oauth_client_id": "herald", "oauth_client_secret": CLIENT_SECRET, "oauth_scope": "api://hooks/.default",
        **extra}, format="json")
    assert response.status_code == 201, response.content
    return {"id": "secured"}, response.json()


def test_a_token_is_fetched_once_sent_and_never_recorded(api, receiver, redis_conn):
    authority = Authority()
    receiver.script = authority.reply
    topic, created = subscribe_with_oauth(api, receiver)
    assert "oauth_client_secret" not in created and created["oauth_token_url"] == receiver.url + "/token"
    for n in range(5):
        publish(api, topic, n)
    drain()
    hooks = [r for r in receiver.requests if r.path == "/hook"]
    assert len(hooks) == 5 and {r.headers["authorization"] for r in hooks} == {"Bearer token-1"}
    token_requests = [r for r in receiver.requests if r.path.endswith("/token")]
    assert len(token_requests) == 1
    assert parse_qs(token_requests[0].body.decode())["scope"] == ["api://hooks/.default"]
    assert Delivery.objects.filter(status="succeeded").count() == 5
    recorded = {a.request_headers["Authorization"] for a in Attempt.objects.all()}
    assert recorded == {"Bearer (redacted)"}
    text = dump()
    assert CLIENT_SECRET not in text and "token-1" not in text
    assert CLIENT_SECRET not in api.get(f"/api/subscriptions/{created['id']}/").content.decode()


def test_a_401_renews_the_token_once_within_the_attempt(api, receiver, redis_conn):
    authority = Authority()
    receiver.script = authority.reply
    topic, created = subscribe_with_oauth(api, receiver)
    publish(api, topic, 1)
    drain()
    authority.valid = set()  # the authority revoked token-1
    publish(api, topic, 2)
    drain()
    second = Delivery.objects.order_by("-id").first()
    assert second.status == "succeeded" and second.attempt_count == 1  # renewed and resent: one attempt
    assert authority.issued == ["token-1", "token-2"]
    assert [r.headers["authorization"] for r in receiver.requests if r.path == "/hook"][-2:] == [
        "Bearer token-1", "Bearer token-2"]


def test_a_failing_token_endpoint_fails_the_attempt_saying_why(api, receiver, redis_conn):
    receiver.script = lambda request: Reply(status=401 if request.path.endswith("/token") else 200)
    topic, _ = subscribe_with_oauth(api, receiver)
    publish(api, topic)
    drain()
    attempt = Attempt.objects.get()
    assert attempt.error_class == "token" and "the token endpoint answered 401" in attempt.error_detail
    assert [r.path for r in receiver.requests] == ["/hook/token"]  # nothing sent without a token


def test_workers_share_one_fetch(api, receiver, processes, redis_conn):
    authority = Authority()
    receiver.script = authority.reply
    topic, _ = subscribe_with_oauth(api, receiver)
    for _ in range(3):
        processes.worker(HERALD_MAX_IN_FLIGHT_PER_ENDPOINT=4)
    for n in range(30):
        publish(api, topic, n)
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 30, timeout=40)
    assert authority.issued == ["token-1"]


def test_a_token_is_refreshed_before_it_expires(user, receiver, redis_conn):
    authority = Authority(lifetime=oauth.REFRESH_MARGIN_SECONDS + 1)  # usable for one second
    receiver.script = authority.reply
    subscription = Subscription(id=99, oauth_token_url=receiver.url + "/token", oauth_client_id="herald",
                                oauth_client_secret=CLIENT_SECRET)
    assert oauth.bearer(subscription) == "token-1"
    assert oauth.bearer(subscription) == "token-1"
    wait_until(lambda: redis_conn.get(oauth.cache_key(subscription)) is None, timeout=5)
    oauth._local.clear()
    assert oauth.bearer(subscription) == "token-2"


def test_the_token_url_is_checked_like_an_endpoint(api, receiver, settings):
    api.post("/api/topics/", {"name": "guarded"}, format="json")
    base = {"topic": "guarded", "endpoint": receiver.url, "oauth_client_id": "c", "oauth_client_secret": "s"}
    blocked = api.post("/api/subscriptions/", {**base, "oauth_token_url": "http://169.254.169.254/token"},
                       format="json")
    assert blocked.status_code == 400 and "oauth_token_url" in blocked.json()
    partial = api.post("/api/subscriptions/", {"topic": "guarded", "endpoint": receiver.url,
                                               "oauth_token_url": receiver.url + "/token"}, format="json")
    assert partial.status_code == 400 and "together" in str(partial.json())
    assert not Subscription.objects.exists()


def test_a_failed_fetch_is_remembered_with_backoff(api, receiver, redis_conn):
    receiver.script = lambda request: Reply(status=503 if request.path.endswith("/token") else 200)
    topic, _ = subscribe_with_oauth(api, receiver)
    publish(api, topic, 1)
    drain()
    publish(api, topic, 2)
    drain()
    first, second = Attempt.objects.order_by("delivery_id")
    assert first.error_class == second.error_class == "token"
    assert "the token endpoint answered 503; not asked again for 5 s" in first.error_detail
    assert "a recent fetch failed; asked again after 5 s" in second.error_detail
    assert [r.path for r in receiver.requests] == ["/hook/token"]  # asked once, not once per send
    key = oauth.cache_key(Subscription.objects.get())
    assert 0 < redis_conn.ttl(key + ":failed") <= oauth.FAILURE_BACKOFF_SECONDS
    redis_conn.delete(key + ":failed")  # the backoff ran out
    publish(api, topic, 3)
    drain()
    assert "not asked again for 10 s" in Attempt.objects.order_by("-id").first().error_detail  # it doubles

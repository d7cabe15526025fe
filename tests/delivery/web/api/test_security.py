"""Security at the edges: confirmation, secrets and rotation, idempotency, rate limits, outages; admin buttons that
answer 404 alike for what is missing and what the user may not touch, and the demo receiver's 400 to malformed
requests."""

import json
import os
import socket
import subprocess
import sys
from datetime import timedelta

import django_rq
import pytest
from django.contrib.auth.models import Permission
from django.core.cache import caches
from django.utils import timezone
from rq.job import Job
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from delivery.models import Delivery, Message
from delivery.web.api.throttling import PublishRateThrottle
from subscriptions.models import Subscription
from tests.conftest import ROOT, subprocess_env, subscribe, wait_until
from tests.receiver import Reply, parse_cloudevent
from tests.test_first_steps import start_receiver

pytestmark = pytest.mark.django_db(transaction=True)



def echo_validation(request):
    event = request.json()
    if event["type"] == "herald.subscription.confirmation":
        return Reply(body=json.dumps({"validationResponse": event["data"]["token"]}).encode())
    return Reply()


@pytest.fixture
def confirmation_on(settings):
    settings.HERALD_REQUIRE_CONFIRMATION = True


def test_handshake_confirms_a_subscription_that_echoes_the_token(api, receiver, run_worker, confirmation_on):
    receiver.script = echo_validation
    topic, subscription = subscribe(api, receiver)
    assert subscription["status"] == "pending_confirmation"
    assert api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()["deliveries"] == 0

    run_worker()

    [request] = receiver.wait_for(1)
    event, data = parse_cloudevent(request)
    assert event["type"] == "herald.subscription.confirmation"
    assert set(data) == {"subscription_id", "token", "confirm_url"}
    Webhook(subscription["secret"]).verify(request.body, request.headers)
    assert Subscription.objects.get(id=subscription["id"]).status == "confirmed"
    assert api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json").json()["deliveries"] == 1


def test_confirm_url_and_api_token_confirm(api, receiver, run_worker, confirmation_on, client):
    receiver.script = [Reply(status=200, body=b"{}")]  # answers, but does not echo the token
    _, first = subscribe(api, receiver)
    run_worker()
    confirm_url = receiver.wait_for(1)[0].json()["data"]["confirm_url"]
    assert Subscription.objects.get(id=first["id"]).status == "pending_confirmation"

    path = confirm_url.split("127.0.0.1:8000", 1)[1]
    assert client.get(path).status_code == 200  # anyone holding the link, no login (SNS's SubscribeURL)
    assert Subscription.objects.get(id=first["id"]).status == "confirmed"

    second = api.post("/api/subscriptions/", {"topic": first["topic"], "endpoint": receiver.url + "2"},
                      format="json").json()
    run_worker()
    token = receiver.wait_for(2)[1].json()["data"]["token"]
    assert api.post(f"/api/subscriptions/{second['id']}/confirm/", {"token": "wrong"}, format="json"
                    ).status_code == 400
    confirmed = api.post(f"/api/subscriptions/{second['id']}/confirm/", {"token": token}, format="json")
    assert confirmed.status_code == 200 and confirmed.json()["status"] == "confirmed"


def test_expired_tokens_are_refused_and_can_be_resent(api, receiver, run_worker, confirmation_on, client):
    receiver.script = [Reply(body=b"{}")]
    _, subscription = subscribe(api, receiver)
    run_worker()
    token = receiver.wait_for(1)[0].json()["data"]["token"]
    Subscription.objects.filter(id=subscription["id"]).update(
        confirmation_expires_at=timezone.now() - timedelta(seconds=1))

    response = client.get("/api/subscriptions/confirm/", {"token": token})
    assert response.status_code == 400 and "expired" in response.json()["token"][0]

    assert api.post(f"/api/subscriptions/{subscription['id']}/resend-confirmation/").status_code == 202
    run_worker()
    fresh = receiver.wait_for(2)[1].json()["data"]["token"]
    assert fresh != token
    assert client.get("/api/subscriptions/confirm/", {"token": fresh}).status_code == 200


def test_rotation_signs_with_both_secrets_for_24_hours(api, receiver, run_worker):
    topic, subscription = subscribe(api, receiver)
    old = subscription["secret"]
    rotated = api.post(f"/api/subscriptions/{subscription['id']}/rotate-secret/")
    assert rotated.status_code == 200
    new = rotated.json()["secret"]
    assert new != old and new.startswith("whsec_")

    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    run_worker()
    [request] = receiver.wait_for(1)
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(request.body, request.headers)
    Webhook(new).verify(request.body, request.headers)

    Subscription.objects.filter(id=subscription["id"]).update(
        previous_secret_expires_at=timezone.now() - timedelta(seconds=1))
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 2}, format="json")
    run_worker()
    second = receiver.wait_for(2)[1]
    Webhook(new).verify(second.body, second.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(second.body, second.headers)


def test_secrets_never_show_outside_create_and_rotate(api, receiver, admin_client):
    _, subscription = subscribe(api, receiver)
    secret = subscription["secret"]
    rotated = api.post(f"/api/subscriptions/{subscription['id']}/rotate-secret/").json()["secret"]
    for text in [
        api.get("/api/subscriptions/").content, api.get(f"/api/subscriptions/{subscription['id']}/").content,
        admin_client.get("/admin/herald_subscriptions/subscription/").content,
        admin_client.get(f"/admin/herald_subscriptions/subscription/{subscription['id']}/change/").content,
    ]:
        assert secret.encode() not in text and rotated.encode() not in text


def test_idempotency_key_replays_within_24_hours(api, receiver):
    topic, _ = subscribe(api, receiver)
    url = f"/api/topics/{topic['id']}/publish/"
    first = api.post(url, {"payload": {"a": 1}}, format="json", HTTP_IDEMPOTENCY_KEY="order-1").json()
    again = api.post(url, {"payload": {"a": 1}}, format="json", HTTP_IDEMPOTENCY_KEY="order-1")
    assert again.status_code == 202
    assert again.json() == {**first, "duplicate": True}
    assert Message.objects.count() == 1 and Delivery.objects.count() == 1

    conflict = api.post(url, {"payload": {"a": 2}}, format="json", HTTP_IDEMPOTENCY_KEY="order-1")
    assert conflict.status_code == 409

    Message.objects.update(published_at=timezone.now() - timedelta(hours=24, seconds=1))
    later = api.post(url, {"payload": {"a": 2}}, format="json", HTTP_IDEMPOTENCY_KEY="order-1").json()
    assert later["message_id"] != first["message_id"] and later["duplicate"] is False


def test_publish_is_rate_limited_per_user(api, other_api, receiver, monkeypatch):
    monkeypatch.setattr(PublishRateThrottle, "rate", "2/min", raising=False)
    topic, _ = subscribe(api, receiver)
    url = f"/api/topics/{topic['id']}/publish/"
    assert [api.post(url, {"payload": n}, format="json").status_code for n in range(3)] == [202, 202, 429]
    limited = api.post(url, {"payload": 9}, format="json")
    assert limited.status_code == 429 and int(limited["Retry-After"]) > 0
    assert Message.objects.count() == 2
    other_topic = other_api.post("/api/topics/", {"name": "mine"}, format="json").json()
    assert other_api.post(f"/api/topics/{other_topic['id']}/publish/", {"payload": 1},
                          format="json").status_code == 202  # limits are per user


def test_redis_down_answers_503_and_writes_nothing(api, receiver, settings):
    topic, _ = subscribe(api, receiver)
    dead = "redis://127.0.0.1:1/0"
    settings.RQ_QUEUES = {name: {"URL": dead} for name in ("deliveries", "retries")}
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": dead}}

    caches._settings = None
    if hasattr(caches._connections, "default"):
        del caches._connections.default

    response = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")

    assert response.status_code == 503 and response["Retry-After"]
    assert Message.objects.count() == 0 and Delivery.objects.count() == 0


def test_database_down_answers_503():
    script = (
        "import django; django.setup();"
        "from rest_framework.test import APIClient;"
        "r = APIClient(HTTP_AUTHORIZATION='Token abc', HTTP_HOST='localhost').get('/api/topics/');"
        "print(r.status_code, r.json()['detail'])"
    )
    env = subprocess_env(DATABASE_URL="postgres://nobody@127.0.0.1:1/none")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.startswith("503 The database is unavailable"), out.stdout + out.stderr
    assert os.environ.get("DATABASE_URL") != env["DATABASE_URL"]


def redis_contents(connection) -> str:
    """Every key and value in Redis, as text: what a Redis dump or a monitoring tool would show."""
    readers = {"string": lambda key: connection.get(key), "hash": lambda key: connection.hgetall(key),
               "list": lambda key: connection.lrange(key, 0, -1), "set": lambda key: connection.smembers(key),
               "zset": lambda key: connection.zrange(key, 0, -1)}
    seen = []
    for key in connection.scan_iter():
        value = readers.get(connection.type(key).decode(), lambda key: b"")(key)
        seen.append(f"{key!r} {value!r}")
    return "\n".join(seen)


def test_confirmation_tokens_appear_in_no_job_argument_and_no_worker_log(api, receiver, processes, redis_conn,
                                                                          confirmation_on, tmp_path):
    receiver.script = [Reply(body=b"{}")]
    _, subscription = subscribe(api, receiver)
    queued = redis_contents(redis_conn)
    [job_id] = django_rq.get_queue("deliveries").job_ids  # a pump: the handshake is taken from the database
    assert Job.fetch(job_id, connection=redis_conn).args == ("deliveries",)

    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        processes.worker(output=log, LOG_LEVEL="DEBUG", RQ_LOG_LEVEL="DEBUG")
        token = receiver.wait_for(1)[0].json()["data"]["token"]
        wait_until(lambda: "Successfully completed" in log_path.read_text())  # the job's last log line
    assert token not in queued
    assert token not in redis_contents(redis_conn)
    logged = log_path.read_text()
    assert "delivery.engine.sending.jobs.pump" in logged  # the log was captured, at DEBUG
    assert token not in logged
    # The token still works: it is derived, not stored.
    assert api.post(f"/api/subscriptions/{subscription['id']}/confirm/", {"token": token},
                    format="json").status_code == 200


def test_admin_buttons_answer_404_alike_to_staff_without_permission(client, django_user_model, traffic):
    staff = django_user_model.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_subscription"))
    client.force_login(staff)
    existing = Subscription.objects.first().id
    for object_id in (existing, existing + 1000):
        answer = client.post(f"/admin/herald_subscriptions/subscription/{object_id}/do/pause/")
        assert answer.status_code == 404
    assert Subscription.objects.get(id=existing).status == "confirmed"


def raw_request(port: int, head: bytes, body: bytes = b"") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_the_demo_receiver_answers_400_to_malformed_requests(processes):
    port, log, _ = start_receiver(processes)
    body = json.dumps({"type": "herald.subscription.confirmation", "data": "not an object"}).encode()
    head = f"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    answer = raw_request(port, head, body)
    assert answer.startswith(b"HTTP/1.1 400") and b"data must be an object with a token" in answer
    for declared in (b"-1", b"abc", b"99999999999"):
        answer = raw_request(port, b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: " + declared + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400") and b"Content-Length must be" in answer

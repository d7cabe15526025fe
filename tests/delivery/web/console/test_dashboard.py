"""The operators' dashboard (console/dashboard.py): attempts over time, failing endpoints and why, dead letters,
queues and workers (or that Redis is unreachable), expiring client certificates; the admin index links to it."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Worker

from delivery.engine.sending import attempts
from delivery.engine.state import health
from delivery.models import Attempt, Delivery
from delivery.web import selectors
from subscriptions.models import Endpoint, Subscription
from tests.conftest import publish, wait_until
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import words
from tests.receiver import Reply

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)
def test_dashboard_shows_failures_states_dead_letters_and_queues(admin_client, traffic, processes, redis_conn):
    processes.worker()
    wait_until(lambda: Worker.all(connection=redis_conn))
    page = admin_client.get("/dashboard/").content.decode()
    dead = Delivery.objects.get(status="dead_lettered")
    assert f'href="/admin/herald_delivery/delivery/{dead.id}/change/"' in page  # the failed delivery is one click away
    text = words(page)
    assert "max_attempts : 1" in text
    assert "succeeded 1 failed 2" in text  # "good" succeeded once; "bad" failed twice
    assert "deliveries : 0 job(s) waiting" in text
    assert "active 1" in text
    assert "No worker is running." not in text


@pytest.mark.django_db(transaction=True)
def test_the_dashboard_says_why_for_every_failing_row(admin_client, api, receiver):
    receiver.script = [Reply(status=503)]
    topic = api.post("/api/topics/", {"name": "why"}, format="json").json()
    subscription = api.post("/api/subscriptions/", {
        "topic": topic["id"], "endpoint": receiver.url,
        "delivery_policy": {"retrySchedule": {"delays": [3600]}}}, format="json").json()
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    delivery = Delivery.objects.get()
    attempts.process([delivery.id], "deliveries")
    endpoint = Endpoint.objects.get(id=subscription["endpoint_id"])
    health.endpoint_disable(endpoint=endpoint)

    text = words(admin_client.get("/dashboard/").content.decode())

    assert "1 attempt(s) failed; next attempt at" in text and "last error: HTTP 503" in text
    assert "endpoint disabled: disabled by hand" in text  # the pending retry's row says its endpoint is why
    assert text.count("disabled by hand") == 2  # and the endpoint's own row says it too


def test_root_and_view_site_lead_to_the_dashboard(client, admin_client):
    assert client.get("/").status_code == 302 and client.get("/").url == "/dashboard/"
    assert admin_client.get("/", follow=True).redirect_chain[-1][0] == "/dashboard/"


@pytest.fixture
def delivery(api, redis_conn) -> Delivery:
    topic = create_topic(api)
    create_subscription(api, topic["id"])
    publish(api, topic)
    return Delivery.objects.get()


def attempt(delivery, number: int, started_at, outcome: str) -> Attempt:
    return Attempt.objects.create(delivery=delivery, number=number, queue="deliveries", started_at=started_at,
                                  duration_ms=12, request_url="http://127.0.0.1:9/hook", outcome=outcome)


def test_the_chart_counts_attempts_per_hour_of_the_day_and_per_minute_of_the_hour(admin_client, delivery):
    now = timezone.now()
    two_hours_ago, five_hours_ago = now - timedelta(hours=2), now - timedelta(hours=5)
    for number, (at, outcome) in enumerate([(two_hours_ago, "success"), (two_hours_ago, "success"),
                                            (two_hours_ago, "retryable_failure"),
                                            (five_hours_ago, "retryable_failure")], 1):
        attempt(delivery, number, at, outcome)

    day = admin_client.get("/dashboard/").context["traffic"]
    assert (day["span"], len(day["buckets"]), day["total_ok"], day["total_failed"], day["peak"]) == (
        "24h", 25, 2, 2, 3)
    busiest = next(b for b in day["buckets"] if b["at"] == two_hours_ago.replace(minute=0, second=0, microsecond=0))
    assert {name: busiest[name] for name in ("ok", "failed", "w", "ok_h", "failed_h", "failed_y", "ok_y")} == {
        "ok": 2, "failed": 1, "w": 3.2, "ok_h": 80.0, "failed_h": 40.0, "failed_y": 80.0, "ok_y": 0.0}
    failed = next(b for b in day["buckets"] if b["at"] == five_hours_ago.replace(minute=0, second=0, microsecond=0))
    assert (failed["ok"], failed["failed"], failed["failed_h"], failed["ok_y"]) == (0, 1, 40.0, 80.0)
    assert sum(b["ok"] + b["failed"] for b in day["buckets"]) == 4

    hour = admin_client.get("/dashboard/?span=1h").context["traffic"]
    assert (hour["span"], len(hour["buckets"]), hour["total_ok"], hour["total_failed"], hour["peak"]) == (
        "1h", 61, 0, 0, 1)
    assert admin_client.get("/dashboard/?span=7d").context["traffic"]["span"] == "24h"  # a span it does not offer


def test_the_dashboard_says_when_redis_is_unreachable(admin_client, monkeypatch):
    def unreachable():
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(selectors, "queue_depths", unreachable)
    response = admin_client.get("/dashboard/")
    assert response.status_code == 200
    assert ('<p class="errornote">Redis is unreachable: Error 111 connecting to 127.0.0.1:6379. Connection '
            'refused.</p>') in response.content.decode()
    assert "No worker is running." in words(response.content.decode())


def test_client_certificates_expiring_within_thirty_days_are_listed(admin_client, api, delivery):
    soon = Subscription.objects.get()
    later = Subscription.objects.get(id=create_subscription(api, soon.topic_id, "http://127.0.0.1:9/later")["id"])
    assert 'id="expiring-certificates"' not in admin_client.get("/dashboard/").content.decode()
    expires = timezone.now() + timedelta(days=5)
    Subscription.objects.filter(id=soon.id).update(client_certificate_expires_at=expires)
    Subscription.objects.filter(id=later.id).update(client_certificate_expires_at=expires + timedelta(days=60))

    page = admin_client.get("/dashboard/").content.decode()
    section = page.split('id="expiring-certificates"')[1].split("</section>")[0]
    assert "Client certificates expiring within 30 days" in section
    assert re.findall(r'<a href="/admin/herald_subscriptions/subscription/(\d+)/change/">', section) == [str(soon.id)]
    assert f"<td>{expires:%Y-%m-%d %H:%M:%S}</td>" in section


def test_the_admin_index_links_to_the_dashboard_for_any_staff_user(client, django_user_model, admin_client):
    staff = django_user_model.objects.create_user("operator", password="pw-operator-123", is_staff=True)
    assert client.get("/dashboard/").url == "/admin/login/?next=/dashboard/"
    client.force_login(staff)  # no permissions of its own
    assert 'href="/admin/herald_delivery/dashboard/"' in client.get("/admin/").content.decode()
    entry = client.get("/admin/herald_delivery/dashboard/")
    assert (entry.status_code, entry.url) == (302, "/dashboard/")
    assert client.get("/dashboard/").status_code == 200
    assert admin_client.get("/admin/herald_delivery/dashboard/add/").status_code == 403

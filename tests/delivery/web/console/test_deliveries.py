"""The pages of messages, deliveries and attempts (console/deliveries.py): records read, never edited or deleted by
hand; a message's fan-out, a delivery's state in words with its retry-now and stop-retrying buttons, an attempt's
request and response."""

import re

import psycopg
import pytest
from django.db import connection

from delivery.engine.sending import attempts
from delivery.models import Attempt, Delivery
from delivery.web.console.deliveries import AttemptInline
from tests.conftest import drain, publish, settle
from tests.delivery.web.api.calls import create_subscription, create_topic
from tests.delivery.web.console.pages import buttons, shown_messages, words
from tests.receiver import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_attempt_detail_shows_request_and_response_excerpts(admin_client, traffic):
    attempt = Attempt.objects.filter(outcome="retryable_failure").first()
    page = admin_client.get(f"/admin/herald_delivery/attempt/{attempt.id}/change/").content.decode()
    assert "webhook-signature" in page and "&quot;data&quot;:&quot;bad&quot;" in page
    assert "{&quot;error&quot;:&quot;nope&quot;}" in page
    assert admin_client.post(f"/admin/herald_delivery/attempt/{attempt.id}/delete/").status_code == 403


def test_operator_can_stop_retrying_a_delivery(admin_client, api, receiver):
    receiver.script = [Reply(status=500)]
    topic = api.post("/api/topics/", {"name": "stop"}, format="json").json()
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url}, format="json")
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    settle()  # one failed attempt; the next (workfront) is 84.8 s away
    delivery = Delivery.objects.get()
    assert delivery.status == "pending" and delivery.attempt_count == 1

    response = admin_client.post("/admin/herald_delivery/delivery/", {"action": "dead_letter",
                                                               "_selected_action": [delivery.id]}, follow=True)
    assert "Dead-lettered 1 deliveries." in response.content.decode()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.dead_letter_reason) == ("dead_lettered", "manual")


def test_the_stop_retrying_button_dead_letters_a_pending_delivery(admin_client, api):
    topic = create_topic(api)
    create_subscription(api, topic["id"])
    publish(api, topic)
    delivery = Delivery.objects.get()
    page = f"/admin/herald_delivery/delivery/{delivery.id}/"
    assert buttons(admin_client.get(page + "change/").content.decode()) == ["retry", "stop"]
    response = admin_client.post(page + "do/stop/", follow=True)
    assert shown_messages(response) == [
        ("success", f"Delivery {delivery.id} was dead-lettered by hand; it can be redriven later.")]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.dead_letter_reason) == ("dead_lettered", "manual")
    assert buttons(response.content.decode()) == ["retry"]


def test_a_long_endpoint_url_is_cut_to_sixty_characters_in_the_list(admin_client, api):
    topic = create_topic(api)
    long_url = "http://127.0.0.1:9/" + "a" * 50  # 69 characters
    create_subscription(api, topic["id"], long_url)
    create_subscription(api, topic["id"], "http://127.0.0.1:9/short")
    publish(api, topic)
    page = admin_client.get("/admin/herald_delivery/delivery/").content.decode()
    assert f'<td class="field-endpoint_url">{long_url[:57]}…</td>' in page
    assert '<td class="field-endpoint_url">http://127.0.0.1:9/short</td>' in page


def test_a_deliverys_page_shows_one_moment_while_a_worker_records(admin_client, api, receiver, monkeypatch):
    """A try recorded while the page is being read (right after "Retry now") shows neither half of it."""
    receiver.script = [Reply(status=503)]
    topic = api.post("/api/topics/", {"name": "moment"}, format="json").json()
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url,
                                     "delivery_policy": {"retrySchedule": {"delays": [3600]}}}, format="json")
    api.post(f"/api/topics/{topic['id']}/publish/", {"payload": 1}, format="json")
    delivery = Delivery.objects.get()
    attempts.process([delivery.id], "deliveries")
    db = connection.settings_dict
    worker = psycopg.connect(f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={db['NAME']}",
                             autocommit=True)
    real = AttemptInline.get_queryset

    def meanwhile(self, request):  # between reading the delivery and reading its attempts, a worker records a try
        worker.execute("UPDATE herald_delivery_delivery SET status = 'succeeded', attempt_count = 2 WHERE id = %s",
                       [delivery.id])
        worker.execute("INSERT INTO herald_delivery_attempt (delivery_id, number, queue, started_at, duration_ms, "
                       "request_url, request_headers, request_body, response_status, response_headers, "
                       "response_body, error_class, error_detail, outcome) SELECT delivery_id, 2, 'manual', now(), "
                       "1, request_url, '{}', '', 200, '{}', '', '', '', 'success' FROM herald_delivery_attempt "
                       "WHERE delivery_id = %s", [delivery.id])
        return real(self, request)

    monkeypatch.setattr(AttemptInline, "get_queryset", meanwhile)
    try:
        page = admin_client.get(f"/admin/herald_delivery/delivery/{delivery.id}/change/").content.decode()
    finally:
        worker.close()
    text = words(page)
    # the page before the try, consistently: its status, its words and its attempts all say one attempt failed
    assert "Status: pending" in text and "attempt 1 of delivery" in text
    assert "attempt 2 of delivery" not in text and "delivered after" not in text
    assert Delivery.objects.get().status == "succeeded"  # which did happen


def test_delivery_page_retry_now_button_sends_it_again(admin_client, traffic, receiver):
    dead = Delivery.objects.get(status="dead_lettered")
    page = admin_client.get(f"/admin/herald_delivery/delivery/{dead.id}/change/").content.decode()
    assert buttons(page) == ["retry"]
    assert "deletelink" not in page and 'name="_save"' not in page
    # What matters first: the state in words and the last error, the internals folded away.
    assert page.index("dead-lettered (max_attempts) after 2 attempt(s); last error: HTTP 500") < page.index("lease")
    assert re.search(r"attempt 2 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: HTTP 500", page)

    receiver.script = [Reply(status=200)]
    response = admin_client.post(f"/admin/herald_delivery/delivery/{dead.id}/do/retry/", follow=True)
    assert f"Delivery {dead.id} will be attempted now" in response.content.decode()
    drain()
    dead.refresh_from_db()
    assert dead.status == "succeeded"
    assert Attempt.objects.filter(delivery=dead).order_by("-number").first().queue == "manual"
    # A delivered one has nothing to retry; the refusal is a message, not an error page.
    assert buttons(admin_client.get(f"/admin/herald_delivery/delivery/{dead.id}/change/").content.decode()) == []
    response = admin_client.post(f"/admin/herald_delivery/delivery/{dead.id}/do/retry/", follow=True)
    assert "Retry now: A succeeded delivery cannot be retried." in response.content.decode()
    assert admin_client.get(f"/admin/herald_delivery/delivery/{dead.id}/do/retry/").status_code == 405
    assert admin_client.post(f"/admin/herald_delivery/delivery/{dead.id}/do/nothing/").status_code == 404


def test_records_are_never_edited_or_deleted_by_hand(admin_client, traffic):
    delivery = Delivery.objects.first()
    attempt = Attempt.objects.first()
    for path in (f"/admin/herald_delivery/delivery/{delivery.id}/delete/",
                 f"/admin/herald_delivery/attempt/{attempt.id}/delete/",
                 f"/admin/herald_delivery/message/{delivery.message_id}/delete/"):
        assert admin_client.post(path).status_code == 403, path
    listing = admin_client.get("/admin/herald_delivery/attempt/").content.decode()
    assert 'value="delete_selected"' not in listing
    # Times to the second, in lists and on pages.
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", listing)


def test_times_in_lists_show_seconds(admin_client, traffic):
    page = admin_client.get("/admin/herald_delivery/delivery/").content.decode()
    stamp = Delivery.objects.order_by("-id").first().last_attempt_at.strftime("%Y-%m-%d %H:%M:%S")
    assert stamp in page


def test_message_page_lists_every_subscription_with_its_outcome(admin_client, api, receiver, traffic):
    topic, subscription = traffic
    api.post("/api/subscriptions/", {"topic": topic["id"], "endpoint": receiver.url + "/eu",
                                     "filter_policy": {"region": ["eu"]}}, format="json")
    message_id = api.post(f"/api/topics/{topic['id']}/publish/", {"payload": "good", "attributes": {"region": "us"}},
                          format="json").json()["message_id"]
    settle()
    page = admin_client.get(f"/admin/herald_delivery/message/{message_id}/change/").content.decode()
    assert 'data-outcome="delivery_created"' in page and 'data-outcome="filtered_out"' in page
    assert "filtered out: attribute &#x27;region&#x27; is &quot;us&quot;, which meets none of [&quot;eu&quot;]" in page
    assert "delivered after 1 attempt(s)" in page

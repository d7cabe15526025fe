"""The schedule a policy produces, beside the policy on the topics' and subscriptions' pages (console/schedules.py):
each attempt with its delay and offset in readable units, the limits, and what ends the schedule."""

import re

import pytest

from tests.delivery.web.api.calls import create_topic

pytestmark = pytest.mark.django_db


def schedule_rows(page: str) -> list[tuple[str, str, str]]:
    table = page.split('<table class="herald-schedule">')[1].split("</table>")[0]
    return re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>", table)


def topic_page(admin_client, topic) -> str:
    return admin_client.get(f"/admin/herald_subscriptions/topic/{topic['id']}/change/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_policy_fields_show_the_schedule_they_produce(admin_client, traffic):
    topic, subscription = traffic
    topic_page = admin_client.get(f"/admin/herald_subscriptions/topic/{topic['id']}/change/").content.decode()
    assert "herald-schedule" in topic_page and "12.0 h" in topic_page  # event-grid: 12 h repeats
    page = admin_client.get(f"/admin/herald_subscriptions/subscription/{subscription['id']}/change/").content.decode()
    assert "max attempts 2" in page and "0.1 s" in page


def test_each_attempt_shows_its_delay_and_offset_in_seconds_minutes_or_hours(admin_client, api):
    topic = create_topic(api, delivery_policy={"retrySchedule": {"delays": [30, 119, 120, 7199, 7200]}, "jitter": 0.2,
                                               "retryLimits": {"maxAttempts": 6, "maxAgeSeconds": 86400}})
    page = topic_page(admin_client, topic)
    assert schedule_rows(page) == [("1", "0 s", "0 s"), ("2", "30 s", "30 s"), ("3", "119 s", "2.5 min"),
                                   ("4", "2.0 min", "4.5 min"), ("5", "120.0 min", "2.1 h"), ("6", "2.0 h", "4.1 h")]
    assert ('<p class="help">max attempts 6 · time-to-live 24.0 h · jitter ±20% · ends after attempt 6: the maximum '
            'of 6 attempts</p>') in page


def test_a_long_schedule_shows_its_first_ten_attempts_and_its_last_three(admin_client, api):
    topic = create_topic(api, delivery_policy={"retrySchedule": {"delays": [1] * 20},
                                               "retryLimits": {"maxAttempts": 21}})
    rows = schedule_rows(topic_page(admin_client, topic))
    assert [attempt for attempt, _, _ in rows] == [str(n) for n in range(1, 11)] + ["…", "19", "20", "21"]
    assert rows[-1] == ("21", "1 s", "20 s")

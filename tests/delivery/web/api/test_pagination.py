"""Lists are paged and filtered."""

import pytest

from subscriptions.models import Topic
from tests.delivery.web.api.calls import create_subscription, create_topic

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _redis(redis_conn):
    """Publishing enqueues jobs on the real test Redis."""


def test_lists_are_paginated_and_filterable(api):
    for n in range(3):
        create_topic(api, f"t{n}")
    page = api.get("/api/topics/?limit=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    assert api.get("/api/topics/?name=t1").json()["count"] == 1
    topic = Topic.objects.get(name="t0")
    create_subscription(api, topic.id)
    assert api.get(f"/api/subscriptions/?topic={topic.id}").json()["count"] == 1
    assert api.get("/api/subscriptions/?status=paused").json()["count"] == 0

"""Recording tries: attempt rows go in with a COPY (recording.store_attempts), which writes exactly the values it is
given; a try Herald ended itself is recorded as Herald's."""

from datetime import timedelta

import pytest
from django.db.models import NOT_PROVIDED
from django.db.models.fields import DateField
from django.utils import timezone

from delivery.engine.claiming import leases
from delivery.engine.sending import recording
from delivery.engine.state.effective import subscription_policy
from delivery.models import Attempt
from delivery.transport.posting import SendResult
from subscriptions.models import Endpoint


def test_no_attempt_column_needs_django_or_the_database_to_make_its_value():
    """A db_default, a generated column or auto_now/auto_now_add would be skipped or broken by the COPY; a field
    added with one must be stored another way (or the COPY taught it)."""
    needing = [field.name for field in recording.COPIED
               if field.db_default is not NOT_PROVIDED or getattr(field, "generated", False)
               or (isinstance(field, DateField) and (field.auto_now or field.auto_now_add))]
    assert needing == []
    assert {field.name for field in recording.COPIED} >= {"delivery", "number", "exchange", "response_headers"}


@pytest.mark.django_db(transaction=True)
def test_a_send_herald_ended_is_recorded_as_herald_s_not_the_endpoint_s_nor_an_attempt_of_the_delivery(three):
    """cut_short: the process held its most stalled sends and this share the most of them. The try is recorded
    (the request may have arrived), but the endpoint's health does not count it and the delivery's budget counts
    from one attempt later, so a `maxAttempts: 2` delivery still has both of its tries left."""
    now = timezone.now()
    [delivery] = leases.claim(three[:1], now)
    policy = subscription_policy(delivery.subscription)
    ended = SendResult(status=None, duration_ms=1000, started_at=now.timestamp(), error_class="cut_short",
                       error_detail="ended by Herald")

    recording.record([delivery], [recording.Tried(delivery, policy, 1, None, ended, "deliveries")], {}, set(), now)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.budget_attempts) == ("pending", 1, 1)
    assert delivery.next_attempt_at >= now + timedelta(seconds=5)  # the FAST policy's delay after attempt 1
    assert Attempt.objects.get(delivery=delivery).error_class == "cut_short"
    endpoint = Endpoint.objects.get(id=delivery.endpoint_id)
    assert (endpoint.consecutive_failures, endpoint.last_failure_at) == (0, None)

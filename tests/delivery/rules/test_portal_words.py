"""Every state the portal shows has a customer's words (rules/portal_words.py): a state added later without them
fails here, not in front of a customer as `dead_lettered`."""

import pytest

from delivery.rules import portal_words
from delivery.rules.vocabulary import AttemptOutcome, DeadLetterReason, DeliveryStatus, ErrorClass
from subscriptions.states import EndpointState, SubscriptionStatus


@pytest.mark.parametrize("enum,words", [(DeliveryStatus, portal_words.DELIVERY),
                                        (DeadLetterReason, portal_words.WHY_FAILED),
                                        (SubscriptionStatus, portal_words.SUBSCRIPTION),
                                        (EndpointState, portal_words.ENDPOINT),
                                        (AttemptOutcome, portal_words.ATTEMPT),
                                        (ErrorClass, portal_words.ERROR)])
def test_every_state_has_words(enum, words):
    assert set(words) == {member.value for member in enum}
    assert all("_" not in text for text in words.values())


def test_a_pending_delivery_after_a_failure_says_it_will_retry():
    assert portal_words.delivery_status("pending") == "Waiting to be sent"
    assert portal_words.delivery_status("pending", attempts=2) == "Failed, will retry"
    assert portal_words.delivery_status("dead_lettered", attempts=5) == "Failed"

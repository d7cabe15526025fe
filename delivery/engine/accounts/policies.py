"""Delivery policies as they are stored: each level's document valid alone (a topic's in SNS's topic form too),
and valid once merged with the other levels, section by section (rules/policy_levels.py). A document that parses
alone can still make an invalid policy with another level's sections (a subscription's `retryLimits: {}` under a
topic's repeating Event Grid schedule); refused here, with a 400 naming the field, instead of failing every claim
of the subscription later. Claims read a policy that no longer merges (a default changed since) through
`effective.subscription_policy_or_default`: the system default decides for that subscription alone."""

from delivery.engine.state.effective import system_default
from delivery.rules import policy_levels
from delivery.rules.policy import PolicyError
from subscriptions.models import Subscription, Topic

SUBSCRIPTIONS_CHECKED = 1000  # distinct subscription policies a topic's change is checked against


def subscription_policy_checked(document, *, topic: Topic) -> None:
    """A subscription's `delivery_policy`: valid alone, and over its topic's and the default's."""
    policy_levels.validated(document, level=policy_levels.SUBSCRIPTION)
    merged_or_refused(document, topic.delivery_policy, f"with topic {topic.name!r}'s sections and the default's")


def topic_policy_checked(document, *, topic: Topic | None = None) -> None:
    """A topic's `delivery_policy`: valid alone, over the default's, and under each policy its subscriptions have."""
    policy_levels.validated(document, level=policy_levels.TOPIC)
    merged_or_refused(None, document, "with the default's sections")
    if topic is None or topic.pk is None:
        return
    own = (Subscription.objects.filter(topic_id=topic.pk).exclude(delivery_policy=None)
           .values_list("id", "delivery_policy").order_by("id"))
    seen = set()
    for subscription_id, subscription_document in own[:SUBSCRIPTIONS_CHECKED]:
        key = repr(subscription_document)
        if key not in seen:
            seen.add(key)
            merged_or_refused(subscription_document, document, f"under subscription {subscription_id}'s policy")


def merged_or_refused(subscription_document, topic_document, context: str) -> None:
    try:
        policy_levels.effective(subscription_document or None, topic_document or None, system_default())
    except PolicyError as exc:
        raise PolicyError([(path, f"{reason} (in the effective policy this makes, {context})")
                           for path, reason in exc.errors]) from None

"""The effective delivery policy of a subscription: its own, else its topic's, else the system default."""

import json
import logging
from functools import lru_cache

from delivery.conf import herald
from delivery.rules import policy

log = logging.getLogger(__name__)


def system_default():
    raw = herald.DEFAULT_DELIVERY_POLICY
    raw = raw.strip() if isinstance(raw, str) else raw
    if isinstance(raw, str) and raw.startswith("{"):
        return json.loads(raw)
    return raw


@lru_cache(maxsize=4096)
def _parse_cached(document_json: str) -> policy.DeliveryPolicy:
    return policy.parse(json.loads(document_json))


def policy_for(subscription_policy, topic_policy) -> policy.DeliveryPolicy:
    """Hot path: parse once per distinct document per process."""
    for document in (subscription_policy, topic_policy, system_default()):
        if document:
            return _parse_cached(json.dumps(document, sort_keys=True))
    return _parse_cached(json.dumps("sns-default"))


def subscription_policy(subscription) -> policy.DeliveryPolicy:
    return policy_for(subscription.delivery_policy, subscription.topic.delivery_policy)


def subscription_policy_or_default(subscription) -> tuple[policy.DeliveryPolicy, Exception | None]:
    """The subscription's effective policy; should its stored document no longer parse, the system default decides,
    and the error is returned beside it (the attempt path records it; the reconciler only logs it)."""
    try:
        return subscription_policy(subscription), None
    except Exception as exc:
        log.exception("subscription %s: its delivery policy could not be read; the system default decides",
                      subscription.id)
        return policy_for(None, None), exc

"""The effective delivery policy of a subscription: its own sections over its topic's over the system default's,
merged as SNS merges a subscription's DeliveryPolicy over its topic's (`rules/policy_levels.py`).

Parsed once per process per version of a stored document: the parse is kept under whose document it is (the
subscription's or the topic's id) beside the document it was made from; a claim compares the document it loaded
with the one kept (a dict comparison, no serialising) and reads it again only when it changed, whichever way (the
API, the admin, SQL; Python's equality takes 1, 1.0 and true for one another, so an SQL edit that only changes a
number's type in place is seen at the next restart). A document read again is first looked up by its canonical
text, so subscriptions that share a policy share its parse. The documents are kept as the owner gave them (as SNS
shows a DeliveryPolicy as set); PostgreSQL's jsonb already stores them in one canonical form, and the effective
policy is shown beside them."""

import json
import logging
import threading
from collections import OrderedDict
from functools import lru_cache

from delivery.conf import herald
from delivery.rules import policy, policy_levels

log = logging.getLogger(__name__)

KEPT = 8192  # parsed documents per process: far more than the subscriptions one claim loop sees in a minute


class _Parsed:
    """The parse of each owner's document, most recently used last; the oldest go when more than KEPT are kept."""

    def __init__(self, size: int = KEPT):
        self._size = size
        self._kept: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, document) -> policy.DeliveryPolicy:
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None and type(hit[0]) is type(document) and hit[0] == document:
                self._kept.move_to_end(key)
                return hit[1]
        parsed = _by_text(json.dumps(document, sort_keys=True))  # PolicyError for one that no longer parses
        with self._lock:
            self._kept[key] = (json.loads(json.dumps(document)), parsed)  # a copy: the caller's dict may change
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return parsed

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
        _by_text.cache_clear()


_parsed = _Parsed()


@lru_cache(maxsize=KEPT)
def _by_text(canonical: str) -> policy.DeliveryPolicy:
    levels = json.loads(canonical)
    return policy_levels.effective(levels["subscription"], levels["topic"], levels["default"])


def system_default():
    raw = herald.DEFAULT_DELIVERY_POLICY
    raw = raw.strip() if isinstance(raw, str) else raw
    if isinstance(raw, str) and raw.startswith("{"):
        return json.loads(raw)
    return raw


def policy_for(subscription_policy, topic_policy, *, subscription_id=None, topic_id=None) -> policy.DeliveryPolicy:
    """The subscription's, the topic's and the system's documents merged section by section, parsed. The ids name
    whose documents they are (the parse is kept under them); without them, the documents themselves are the key."""
    levels = {"subscription": subscription_policy or None, "topic": topic_policy or None,
              "default": system_default() or None}
    if subscription_id is None and topic_id is None:
        key = ("document", json.dumps(levels, sort_keys=True))
    else:
        key = ("levels", subscription_id, topic_id)
    return _parsed.get(key, levels)


def sources(subscription) -> dict[str, str]:
    """Which level each section of the subscription's effective policy comes from: `subscription`, `topic` or
    `default` (shown beside the effective policy)."""
    return policy_levels.merged(subscription.delivery_policy, subscription.topic.delivery_policy,
                                system_default())[1]


def subscription_policy(subscription) -> policy.DeliveryPolicy:
    return policy_for(subscription.delivery_policy, subscription.topic.delivery_policy,
                      subscription_id=subscription.pk, topic_id=subscription.topic.pk)


def subscription_policy_or_default(subscription) -> tuple[policy.DeliveryPolicy, Exception | None]:
    """The subscription's effective policy; should its stored document no longer parse, the system default decides,
    and the error is returned beside it (the attempt path records it; the reconciler only logs it)."""
    try:
        return subscription_policy(subscription), None
    except Exception as exc:
        log.exception("subscription %s: its delivery policy could not be read; the system default decides",
                      subscription.id)
        return policy_for(None, None), exc

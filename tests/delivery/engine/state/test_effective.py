"""The effective policy (the subscription's, its topic's and the default's documents merged) is parsed once per
process per version of the stored documents, and a change reaches the next claim however it was made
(docs/architecture.md: each piece of work done once, in its place)."""

import pytest

from delivery.engine.state import effective
from delivery.rules import policy, policy_levels
from subscriptions.models import Endpoint, Subscription, Topic


@pytest.fixture
def parses(monkeypatch):
    """Counts the parses behind the cache (a unit test of one module: the parser itself is the real one)."""
    calls = []
    real = policy_levels.effective

    def counted(*levels):
        calls.append(levels)
        return real(*levels)

    monkeypatch.setattr(effective.policy_levels, "effective", counted)
    effective._parsed.clear()
    yield calls
    effective._parsed.clear()


def test_one_parse_per_document_version_however_often_it_is_read(parses):
    document = {"healthyRetryPolicy": {"numRetries": 3, "minDelayTarget": 1, "maxDelayTarget": 1}}
    first = effective.policy_for(dict(document), None, subscription_id=7, topic_id=1)
    for _ in range(100):  # each claim loads a fresh dict from the database
        assert effective.policy_for(dict(document), None, subscription_id=7, topic_id=1) is first
    assert len(parses) == 1

    changed = {"healthyRetryPolicy": {"numRetries": 5, "minDelayTarget": 1, "maxDelayTarget": 1}}
    assert effective.policy_for(changed, None, subscription_id=7, topic_id=1).max_attempts == 6
    assert len(parses) == 2


def test_a_topic_document_is_kept_under_the_topic_and_the_default_under_the_setting(parses, settings):
    topic_doc = "workfront"
    a = effective.policy_for(None, topic_doc, subscription_id=1, topic_id=3)
    b = effective.policy_for(None, topic_doc, subscription_id=2, topic_id=3)
    assert a is b and len(parses) == 1
    settings.HERALD_DEFAULT_DELIVERY_POLICY = "sns-default"
    default = effective.policy_for(None, None)
    settings.HERALD_DEFAULT_DELIVERY_POLICY = "event-grid"
    assert effective.policy_for(None, None) != default  # a changed setting is read, not the kept parse


def test_a_document_that_no_longer_parses_is_not_kept(parses):
    with pytest.raises(policy.PolicyError):
        effective.policy_for({"healthyRetryPolicy": {"numRetries": -1}}, None, subscription_id=9, topic_id=1)
    with pytest.raises(policy.PolicyError):
        effective.policy_for({"healthyRetryPolicy": {"numRetries": -1}}, None, subscription_id=9, topic_id=1)
    assert len(parses) == 2


def test_the_kept_parses_are_bounded():
    kept = effective._Parsed(size=3)
    for n in range(10):
        kept.get(("levels", n, 1), {"subscription": None, "topic": None, "default": "sns-default"})
    assert len(kept._kept) == 3


@pytest.mark.django_db
def test_a_change_made_in_sql_reaches_the_next_read(parses, user):
    topic = Topic.objects.create(owner=user, name="t")
    endpoint = Endpoint.objects.create(owner=user, url="https://example.com/hook")
    subscription = Subscription.objects.create(topic=topic, endpoint=endpoint, delivery_policy="workfront")
    before = effective.subscription_policy(Subscription.objects.select_related("topic").get(pk=subscription.pk))
    Subscription.objects.filter(pk=subscription.pk).update(delivery_policy="event-grid")  # no save(), no updated_at
    after = effective.subscription_policy(Subscription.objects.select_related("topic").get(pk=subscription.pk))
    assert before != after and len(parses) == 2

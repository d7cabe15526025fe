"""Publish latency by fan-out size: how long `POST /publish` work takes for topics with many subscriptions.

    make bench-publish      (throwaway PostgreSQL + Redis)

Above HERALD_INLINE_FANOUT matching subscriptions (500) publishing stores only the message and hands the
deliveries to a fan-out job, so the answer does not grow with the topic.
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import django_rq  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from delivery.engine.intake import fanout  # noqa: E402
from delivery.engine.intake.publishing import message_publish  # noqa: E402
from delivery.models import Delivery, Message  # noqa: E402
from delivery.rules import event_type_filter  # noqa: E402
from delivery.rules.filters import policy as filter_policy  # noqa: E402
from subscriptions.models import Endpoint, Subscription, Topic  # noqa: E402

SIZES = (1, 100, 500, 501, 1000, 10000)
ROUNDS = 5
# Topics of 10,000 subscriptions where publishing decides against most of them: the decisions are recorded on the
# message (ids grouped by outcome), so this shows what recording them costs.
SKIPPING = (
    ("10000 filtering, 1 matches", "confirmed", lambda n: {"customer": [f"c{n}"]}),
    ("10000 filtering, 0 match", "confirmed", lambda n: {"customer": [f"x{n}"]}),
    ("10000 not confirmed", "pending_confirmation", lambda n: None),
)


# Topics of 10,000 subscriptions, each with its own SNS filter policy, where one matches: the cost of filtering.
# Every policy fails on its last key, so every other condition is evaluated for every subscription (the worst case).
ATTRIBUTE_POLICY = lambda n: {  # noqa: E731
    "region": [{"anything-but": {"prefix": "test-"}}], "total": [{"numeric": [">", 0, "<=", 1000]}],
    "$or": [{"ip": [{"cidr": "10.0.0.0/8"}]}, {"tier": [{"equals-ignore-case": "gold"}]}],
    "customer": [f"c{n}"]}
BODY_POLICY = lambda n: {  # noqa: E731
    "order": {"total": [{"numeric": [">", 100]}], "region": [{"prefix": "eu"}]},
    "tags": [{"suffix": "-express"}], "customer": {"id": [f"c{n}"]}}
FILTERING = (
    ("no filters (all 10000 match)", "MessageAttributes", lambda n: None, []),
    ("exact attribute, 1 matches", "MessageAttributes", lambda n: {"customer": [f"c{n}"]}, []),
    ("SNS operators + $or, 1 matches", "MessageAttributes", ATTRIBUTE_POLICY, []),
    ("MessageBody nested, 1 matches", "MessageBody", BODY_POLICY, []),
    ("event types order.*, none match", "MessageAttributes", lambda n: None, ["order.*"]),
)
# The worst a tenant's one subscription may ask for, against the worst message the limits accept (a 256 KiB
# payload, a 256-character event type): each publish to that topic of one subscription, beside the 50 ms target.
BIG_ARRAY = [f"v{n:05}" for n in range(26_000)]  # 26,000 distinct values, about the largest payload (256 KiB)


def DEEP(n: int) -> dict:  # noqa: N802 — an object nine levels deep around one value, as a payload holds it
    value = f"v{n:05}"
    for step in "jihgfedcb":
        value = {step: value}
    return value


WORST = (
    ("ceiling: no filter, the same 26,000-element array", "MessageBody", None, [], {"x": BIG_ARRAY}, "e"),
    ("25 globs '*a'x127+'*b', 256-char type", "MessageAttributes", None, ["*a" * 127 + "*b"] * 25,
     {}, "a" * 256),
    ("anything-but 2,000 values, 26,000-element array", "MessageBody",
     {"x": [{"anything-but": [f"v{i}" for i in range(2000)]}]}, [], {"x": BIG_ARRAY}, "e"),
    ("150 prefixes of 1 KB, 26,000-element array", "MessageBody",
     {"x": [{"prefix": "v" * 1000 + str(n)} for n in range(150)]}, [], {"x": BIG_ARRAY}, "e"),
    ("150 cidr conditions, 26,000-element array", "MessageBody",
     {"x": [{"cidr": f"10.{n}.0.0/16"} for n in range(150)]}, [], {"x": BIG_ARRAY}, "e"),
    ("150 equals-ignore-case of 1 KB, 26,000-element array", "MessageBody",
     {"x": [{"equals-ignore-case": "V" * 1000 + str(n)} for n in range(150)]}, [], {"x": BIG_ARRAY}, "e"),
    ("150 prefixes of 1 KB, 26,000 elements in arrays of arrays", "MessageBody",
     {"x": [{"prefix": "v" * 1000 + str(n)} for n in range(150)]}, [],
     {"x": [[BIG_ARRAY[i:i + 100]] for i in range(0, len(BIG_ARRAY), 100)]}, "e"),
    ("a 10-step dotted path of 15 prefixes, 2,500 objects", "MessageBody",
     {"a.b.c.d.e.f.g.h.i.j": [{"prefix": "w" * 1000 + str(n)} for n in range(15)]}, [],
     {"a": [DEEP(n) for n in range(2_500)]}, "e"),
    ("150 $or branches of a 1 KB prefix, 26,000-element array", "MessageBody",
     {"$or": [{"x": [{"prefix": "v" * 1000 + str(n)}], "y": ["v"]} for n in range(150)]}, [],
     {"x": BIG_ARRAY[:25_990], "y": "v"}, "e"),
    ("5 unanchored wildcards '*vN*z*', 26,000-element array", "MessageBody",
     {"x": [{"wildcard": f"*v{n}*z*"} for n in range(5)]}, [], {"x": BIG_ARRAY}, "e"),
    ("the payload's dotted keys: 10,000 'a.*' keys, 5 paths", "MessageBody",
     {f"a.k{n}": ["nope"] for n in range(5)}, [], {f"a.v{n:05}": n for n in range(10_000)}, "e"),
)
ATTRIBUTES = {"customer": "c17", "region": "eu-west-1", "total": 250, "ip": "10.1.2.3"}
BODY = {"customer": {"id": "c17"}, "order": {"total": 250, "region": "eu-west-1"}, "tags": ["gift", "same-express"]}

decide = fanout.choose


def topic_of(user, name: str, subscription, size: int = 10000) -> Topic:
    """A fresh topic (everything of the last scenario gone) with `size` subscriptions made by
    `subscription(topic, n, endpoint)`."""
    Delivery.objects.all().delete()
    Message.objects.all().delete()
    Topic.objects.filter(owner=user).delete()
    Endpoint.objects.filter(owner=user).delete()
    topic = Topic.objects.create(owner=user, name=name)
    endpoints = Endpoint.objects.bulk_create(
        [Endpoint(owner=user, url=f"http://127.0.0.1:9/{name}/{n}") for n in range(size)])
    Subscription.objects.bulk_create([subscription(topic, n, e) for n, e in enumerate(endpoints)])
    return topic


def main():
    call_command("migrate", verbosity=0)
    django_rq.get_connection("deliveries").flushdb()
    user, _ = get_user_model().objects.get_or_create(username="bench-publish")
    print(f"inline fan-out limit: {os.environ.get('HERALD_INLINE_FANOUT', 500)}; median of {ROUNDS} publishes")
    for size in SIZES:
        Delivery.objects.all().delete()
        Message.objects.all().delete()
        Topic.objects.filter(owner=user).delete()
        Endpoint.objects.filter(owner=user).delete()
        topic = Topic.objects.create(owner=user, name=f"t{size}")
        endpoints = Endpoint.objects.bulk_create(
            [Endpoint(owner=user, url=f"http://127.0.0.1:9/{size}/{n}") for n in range(size)])
        Subscription.objects.bulk_create([Subscription(topic=topic, endpoint=e, status="confirmed")
                                          for e in endpoints])
        timings = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            _, count, _ = message_publish(topic=topic, payload={"n": 1})
            timings.append((time.perf_counter() - started) * 1000)
        mode = "fan-out job" if Message.objects.filter(fanout_pending=True).exists() else "inline"
        print(f"{size:6d} subscriptions: {statistics.median(timings):8.1f} ms  ({mode}, {count} deliveries)")
    for label, status, policy in SKIPPING:
        topic = topic_of(user, "skipping", lambda topic, n, e, status=status, policy=policy: Subscription(
            topic=topic, endpoint=e, status=status, filter_policy=policy(n)))
        timings, unrecorded = [], []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            message, count, _ = message_publish(topic=topic, payload={"n": 1}, attributes={"customer": "c17"})
            timings.append((time.perf_counter() - started) * 1000)
            recorded = len(json.dumps(Message.objects.get(id=message.id).fanout_skipped))
            # The same publish with the decisions made but not stored: what recording them adds.
            fanout.choose = lambda subs, facts: (decide(subs, facts)[0], {})
            started = time.perf_counter()
            message_publish(topic=topic, payload={"n": 1}, attributes={"customer": "c17"})
            unrecorded.append((time.perf_counter() - started) * 1000)
            fanout.choose = decide
        print(f"{label:>27}: {statistics.median(timings):8.1f} ms  ({count} deliveries, decisions recorded in "
              f"{recorded / 1024:.0f} KiB of JSON; {statistics.median(unrecorded):.1f} ms without storing them)")
    print("filtering at 10,000 subscriptions (decide: evaluating every subscription's filters; publish: the whole "
          "publish, deliveries included)")
    for label, scope, policy, event_types in FILTERING:
        topic = topic_of(user, "filtering", lambda topic, n, e, policy=policy, scope=scope, types=event_types:
                         Subscription(topic=topic, endpoint=e, status="confirmed", filter_policy=policy(n),
                                      filter_policy_scope=scope, event_types=types))
        candidates = fanout.topic_subscriptions(topic.id)
        facts = fanout.Facts(ATTRIBUTES, "invoice.paid", BODY)
        decisions = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            chosen, _ = fanout.choose(candidates, facts)
            decisions.append((time.perf_counter() - started) * 1000)
        timings = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            _, count, _ = message_publish(topic=topic, payload=BODY, attributes=ATTRIBUTES, event_type="invoice.paid")
            timings.append((time.perf_counter() - started) * 1000)
        print(f"{label:>33}: decide {statistics.median(decisions):6.1f} ms, publish "
              f"{statistics.median(timings):6.1f} ms  ({count} deliveries)")
    print("the worst input the limits allow, a topic of one subscription (target: < 50 ms per publish)")
    for label, scope, policy, event_types, body, event_type in WORST:
        if policy:
            filter_policy.validate(policy, scope=scope)
        event_type_filter.validate_event_types(event_types)
        topic = topic_of(user, "worst", lambda topic, n, e, policy=policy, scope=scope, types=event_types:
                         Subscription(topic=topic, endpoint=e, status="confirmed", filter_policy=policy,
                                      filter_policy_scope=scope, event_types=types), size=1)
        assert len(json.dumps(body)) <= 262_144
        timings = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            _, count, _ = message_publish(topic=topic, payload=body, event_type=event_type)
            timings.append((time.perf_counter() - started) * 1000)
        print(f"{label:>52}: publish p50 {statistics.median(timings):6.1f} ms, worst {max(timings):6.1f} ms  "
              f"({count} deliveries)")


if __name__ == "__main__":
    main()

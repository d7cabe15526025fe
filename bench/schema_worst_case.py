"""What an owner's schema can make a publish cost (docs/tenants.md, "What a schema may cost"): each keyword whose
cost the payload drives, at the worst the limits allow, beside a plain publish measured in the same run.

    python bench/schema_worst_case.py [--repeat 5]

Each case is an event type with `validate_payloads` and a payload of at most HERALD_MAX_PAYLOAD_BYTES; a publish
is timed to its answer (written and committed, or refused: 400), through `delivery.events.publish` in this
process (the pump is not asked for, so Redis is not in the figure), and so is the schema check alone. The bound:
the check within 10× a plain publish (a small payload, no schema).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fresh import django_on_fresh_postgres  # noqa: E402

ITEMS = 35_000  # about the most small values a 256 KiB payload holds


def cases() -> dict[str, tuple[dict, object]]:
    """{name: (schema, the worst payload for it)} within MAX_PAYLOAD_BYTES."""
    return {
        "pattern ^(a+)+$ on 200,000 a's and a !": ({"type": "string", "pattern": "^(a+)+$"}, "a" * 200_000 + "!"),
        "propertyNames pattern, 5,000 names": ({"propertyNames": {"pattern": "^(a+)+$"}},
                                               {"a" * 30 + str(n): 0 for n in range(5_000)}),
        "items.enum of 9,000, 20,000 items": ({"type": "array", "items": {"enum": list(range(9_000))}},
                                              list(range(20_000))),
        "uniqueItems, 18,000 objects": ({"type": "array", "uniqueItems": True}, [{"n": n} for n in range(18_000)]),
        "contains, 35,000 items": ({"type": "array", "contains": {"type": "string"}}, list(range(ITEMS))),
        "allOf × 100 over 35,000 items": ({"allOf": [{"type": "array", "items": {"type": "integer"}}] * 100},
                                          list(range(ITEMS))),
        "anyOf nesting, failing": ({"$defs": {"n": {"anyOf": [{"type": "string"}, {"items": {"$ref": "#/$defs/n"}}]}},
                                    "$ref": "#/$defs/n"}, [[[[[[[[1]]]]]]]] * 5_000),
        "a tree 60 deep, every level recursing": ({"$defs": {"t": {"type": "object", "properties": {
            "c": {"$ref": "#/$defs/t"}, "v": {"type": "integer"}}}}, "$ref": "#/$defs/t"},
            json.loads('{"v": 1, "c":' * 60 + "{}" + "}" * 60)),
        "allOf × 1,998 empty branches, 9,999 items": ({"items": {"allOf": [{}] * 1998}}, [0] * 9_999),
        "unevaluatedItems, 10,000 items": ({"items": True, "unevaluatedItems": False}, [0] * 10_000),
        "const of 12,500 values × 30 references": ({"$defs": {"c": {"const": [[999] * 12_500]}},
                                                    "allOf": [{"$ref": "#/$defs/c"}] * 30}, [[999] * 12_500]),
        "patternProperties × 1,900, 3,000 names": ({"patternProperties": {f"^z{n}$": {} for n in range(1900)}},
                                                   {f"k{n}": 1 for n in range(3_000)}),
    }


def timed(function, repeat: int) -> float:
    """Median milliseconds of `function()` over `repeat` runs (an exception is an answer too)."""
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            function()
        except Exception:  # noqa: BLE001 (a refusal is the publish's answer)
            pass
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    postgres = django_on_fresh_postgres("herald-schema-bench-", SECRET_KEY="bench",
                                        HERALD_REQUIRE_CONFIRMATION="false", HERALD_ALLOWED_NETWORKS="127.0.0.0/8")
    from django.contrib.auth import get_user_model  # noqa: PLC0415

    from delivery.conf import herald  # noqa: PLC0415
    from delivery.engine.accounts import catalog  # noqa: PLC0415
    from delivery.engine.accounts.subscribing import subscription_create, topic_create  # noqa: PLC0415
    from delivery.engine.intake import publishing  # noqa: PLC0415
    from delivery.events import publish  # noqa: PLC0415
    from subscriptions.models import EventType  # noqa: PLC0415

    try:
        publishing.capturing.set(True)
        owner = get_user_model().objects.create_user("shop")
        topic, _ = topic_create(owner=owner, name="orders")
        subscription_create(topic=topic, endpoint="http://127.0.0.1:9/own")
        plain = timed(lambda: publish(topic, {"order": 1, "sku": "A-1"}, event_type="plain"), args.repeat * 10)
        print(f"budget {herald.SCHEMA_CHECK_BUDGET:,} units; payloads up to {herald.MAX_PAYLOAD_BYTES:,} bytes")
        print(f"{'plain publish (no schema)':<44} {plain:8.1f} ms")
        for n, (name, (schema, payload)) in enumerate(cases().items()):
            size = len(json.dumps(payload))
            assert size <= herald.MAX_PAYLOAD_BYTES, (name, size)
            EventType.objects.create(owner=owner, name=f"case.{n}", schema=schema, validate_payloads=True)
            unbounded = timed(lambda: publish(topic, payload, event_type="unvalidated"), args.repeat)  # noqa: B023
            took = timed(lambda: publish(topic, payload, event_type=f"case.{n}"), args.repeat)  # noqa: B023
            check = timed(lambda: catalog.payload_problem(schema, payload), args.repeat)  # noqa: B023
            try:
                publish(topic, payload, event_type=f"case.{n}")
                answer = "202"
            except Exception as exc:  # noqa: BLE001
                answer = "400 " + ("over budget" if "HERALD_SCHEMA_CHECK_BUDGET" in str(exc) else "mismatch")
            print(f"{name:<40} check {check:6.1f} ms = {check / plain:4.1f}× a plain publish (bound 10×); "
                  f"publish {took:6.1f} ms, the same payload unvalidated {unbounded:6.1f} ms; {size:,} B; {answer}")
    finally:
        postgres.stop()


if __name__ == "__main__":
    main()

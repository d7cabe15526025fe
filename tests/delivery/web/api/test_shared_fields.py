"""Serializer fields built once per thread (delivery/web/api/shared_fields.py): the publish body's serializer
validates as DRF's own would, instance after instance and thread beside thread, while building its fields once."""

import threading

from rest_framework import serializers

from delivery.web.api.publishing import BatchEntrySerializer, PublishSerializer
from delivery.web.api.shared_fields import SharedFields
from delivery.web.api.strict import StrictInput


class Plain(StrictInput, serializers.Serializer):
    name = serializers.CharField(max_length=5)
    count = serializers.IntegerField(required=False, default=1)
    flag = serializers.BooleanField(required=False, default=False)


class Shared(SharedFields, Plain):
    def validate_name(self, value):  # the instance's own field-level hook still runs
        if value == "no":
            raise serializers.ValidationError("not this one")
        return value


BODIES = [
    {"name": "abc"}, {"name": "abc", "count": "7", "flag": "true"}, {"name": "toolong"}, {"count": 2},
    {"name": "abc", "nmae": "typo"}, {"name": 12}, {"name": "abc", "count": "x"}, [], "text",
]


def outcome(serializer_class, data):
    serializer = serializer_class(data=data)
    return (True, dict(serializer.validated_data)) if serializer.is_valid() else (False, serializer.errors)


def test_shared_fields_validate_as_drf_does():
    for data in BODIES:
        assert outcome(Shared, data) == outcome(Plain, data), data
    assert outcome(Shared, {"name": "no"}) == (False, {"name": ["not this one"]})


def test_fields_are_built_once_per_thread_and_class():
    first, second = Shared(data={"name": "a"}), Shared(data={"name": "b"})
    assert first.fields is second.fields
    assert first.fields["name"].parent is not first  # bound to the thread's template, not to a request's instance
    assert PublishSerializer().fields is not BatchEntrySerializer().fields  # per class: the batch entry has `id`
    assert "id" in BatchEntrySerializer().fields and "id" not in PublishSerializer().fields
    other = []
    thread = threading.Thread(target=lambda: other.append(Shared(data={}).fields))
    thread.start()
    thread.join()
    assert other[0] is not first.fields


def test_partial_or_with_a_context_builds_its_own():
    shared = Shared(data={}).fields
    partial = Shared(data={"count": 3}, partial=True)
    assert partial.fields is not shared and partial.fields is partial.fields
    assert outcome(lambda data: Shared(data=data, partial=True), {"count": 3}) == (True, {"count": 3})
    assert Shared(data={}, context={"request": None}).fields is not shared


def test_threads_validating_at_once_see_their_own_data():
    wrong = []

    def validate(n):
        for _ in range(300):
            body = {"payload": {"n": n}, "event_type": f"t.{n}", "attributes": {"k": str(n)}}
            serializer = PublishSerializer(data=body)
            if not serializer.is_valid() or serializer.validated_data["event_type"] != f"t.{n}" or \
                    serializer.validated_data["payload"] != {"n": n}:
                wrong.append((n, serializer.errors))

    threads = [threading.Thread(target=validate, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []

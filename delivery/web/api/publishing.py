"""Publishing through the API: `POST /api/topics/{id}/publish/` (one message) and `publish-batch/` (up to 100), the
shapes of their bodies and answers, and the two actions, which the topics' view set takes in (topics.py). A publish
body's rules (delivery/rules/publish_input.py) are checked once, by the service every publish goes through
(`publishing.entry_from`, for the API and Python alike); the publish rate is throttling.py's."""

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from delivery.conf import herald
from delivery.engine.intake.publishing import Entry, entry_from, message_publish_batch, publish_one
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.plumbing.shortcuts import SharedFields
from delivery.rules import publish_input
from delivery.web.api.base import extend_schema
from delivery.web.api.strict import StrictInput
from delivery.web.api.throttling import PublishRateThrottle


class PublishSerializer(SharedFields, StrictInput, serializers.Serializer):
    """The shape of a publish body; its rules (delivery/rules/publish_input.py) are checked once, by the service
    every publish goes through (`publishing.entry_from`, for the API and Python alike)."""

    payload = serializers.JSONField(required=False, help_text="Any JSON value.")
    message = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True,
                                    help_text="Plain text, instead of payload.")
    event_type = serializers.CharField(required=False, max_length=256, default=publish_input.DEFAULT_EVENT_TYPE,
                                       help_text="What happened, e.g. order.created; herald.* is reserved.")
    event_version = serializers.CharField(
        required=False, allow_null=True, default=None, max_length=64,
        help_text="The version of its event type the payload is in (docs/versions.md); default: the latest.")
    subject = serializers.CharField(required=False, max_length=1024, allow_blank=True, default="")
    attributes = serializers.DictField(
        required=False, default=dict,
        help_text="What filter policies match (docs/filtering.md): each a string (SNS's String), a number (Number) or "
                  "a list of strings, numbers, true, false and null (String.Array).")
    ordering_key = serializers.CharField(
        required=False, allow_null=True, default=None, max_length=256,
        help_text="Subscriptions with ordered delivery receive the messages of one key one at a time, in publish "
                  "order (docs/ordering.md).")
    tenant = serializers.CharField(
        required=False, allow_null=True, default=None, max_length=128,
        help_text="The external id of one of your tenants: the message goes to that tenant's subscriptions and your "
                  "own only (docs/tenants.md). Empty: your own subscriptions only.")
    broadcast = serializers.BooleanField(required=False, default=False,
                                         help_text="The message goes to every tenant's subscriptions too.")
    unknown_tenant = serializers.ChoiceField(
        choices=publish_input.UNKNOWN_TENANT, required=False, default="refuse",
        help_text="If `tenant` is not registered: refuse (400, the default), create (register it now, within your "
                  "tenant quota) or record (keep the message for your own subscriptions only).")


class BatchEntrySerializer(PublishSerializer):
    id = serializers.CharField(max_length=80, help_text="Your id for this entry, unique in the batch; results name it.")
    idempotency_key = serializers.CharField(max_length=255, required=False, allow_null=True, default=None)


class PublishBatchSerializer(SharedFields, StrictInput, serializers.Serializer):
    entries = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=100,
                                    help_text="1 to 100 entries, each like a publish body plus `id`.")


class BatchSucceededSerializer(serializers.Serializer):
    id = serializers.CharField()
    message_id = serializers.UUIDField()
    deliveries = serializers.IntegerField()
    duplicate = serializers.BooleanField()


class BatchFailedSerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.IntegerField(help_text="What publishing this entry alone would have answered.")
    errors = serializers.DictField()


class PublishedBatchSerializer(serializers.Serializer):
    successful = BatchSucceededSerializer(many=True)
    failed = BatchFailedSerializer(many=True)


class PublishedSerializer(serializers.Serializer):
    message_id = serializers.UUIDField()
    deliveries = serializers.IntegerField()
    duplicate = serializers.BooleanField()


def publish_entry(serializer_class, data, *, idempotency_key=None) -> Entry:
    """One publish body, validated: 400 naming the field, 413 for a payload over HERALD_MAX_PAYLOAD_BYTES."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    valid = {name: value for name, value in serializer.validated_data.items() if name != "id"}
    return entry_from(valid, idempotency_key=idempotency_key)


# A topic's two publish actions, a mixin of the topics' view set: each finds its topic with the view's `owned_object()`
# (by id or by name) and counts against the publisher's rate. (No docstring: the schema would show it as the topics'
# description, which drf-spectacular reads from the view set's class and its bases.)
class PublishActions:
    @extend_schema(
        request=PublishSerializer, responses={202: PublishedSerializer},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
    )
    @action(detail=True, methods=["post"], throttle_classes=[PublishRateThrottle], serializer_class=PublishSerializer)
    def publish(self, request, pk=None):
        topic = self.owned_object()
        limit = herald.MAX_PAYLOAD_BYTES
        if len(request.body) > 2 * limit + 65536:
            raise ApplicationError(f"The request is larger than {limit} bytes of payload allow.", status_code=413)
        key = request.headers.get("Idempotency-Key") or None
        if key is not None and len(key) > 255:
            raise ApplicationError("At most 255 characters.", field="Idempotency-Key")
        entry = publish_entry(PublishSerializer, request.data, idempotency_key=key)
        message, count, created = publish_one(topic, entry)
        # PublishedSerializer's shape, written out: a serializer here would rebuild its fields for three values.
        body = {"message_id": str(message.id), "deliveries": count, "duplicate": not created}
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=PublishBatchSerializer, responses={200: PublishedBatchSerializer})
    @action(detail=True, methods=["post"], url_path="publish-batch", throttle_classes=[PublishRateThrottle],
            serializer_class=PublishBatchSerializer)
    def publish_batch(self, request, pk=None):
        """Up to 100 messages in one request (like SNS PublishBatch): each entry is validated alone; the valid ones
        are published together and the answer lists, by your entry ids, what was published and what failed."""
        topic = self.owned_object()
        batch = PublishBatchSerializer(data=request.data)
        batch.is_valid(raise_exception=True)
        raw = batch.validated_data["entries"]
        missing = [n for n, item in enumerate(raw) if not isinstance(item.get("id"), str) or not item["id"]]
        if missing:
            raise ApplicationError(f"entries[{missing[0]}].id is required: each entry needs an id (a non-empty "
                                   f"string, unique in the batch) that the answer names it by", field="entries")
        ids = [item["id"] for item in raw]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ApplicationError(f"Entry ids must be distinct in a batch; repeated: {', '.join(repeated)[:200]}",
                                   field="entries")
        entries, failed = [], []
        for entry_id, item in zip(ids, raw, strict=True):
            try:
                entries.append((entry_id, publish_entry(BatchEntrySerializer, item)))
            except ApplicationError as exc:
                failed.append({"id": entry_id, "status": exc.status_code, "errors": exc.as_payload()})
            except ValidationError as exc:
                failed.append({"id": entry_id, "status": 400, "errors": exc.detail})
        published = message_publish_batch(topic=topic, entries=[entry for _, entry in entries])
        successful = []
        for (entry_id, _), result in zip(entries, published, strict=True):
            if isinstance(result, ApplicationError):
                failed.append({"id": entry_id, "status": result.status_code, "errors": result.as_payload()})
                continue
            message, count, created = result
            successful.append({"id": entry_id, "message_id": message.id, "deliveries": count,
                               "duplicate": not created})
        failed.sort(key=lambda item: ids.index(item["id"]))
        return Response(PublishedBatchSerializer({"successful": successful, "failed": failed}).data)

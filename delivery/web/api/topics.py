"""The API of topics: create, read, change and delete them, publish to them (one message or a batch), and
their metrics. Views validate input and call one service of delivery/engine; every topic is the requester's own
(another owner's is a 404; a tenant reads its owner's topics open to tenants)."""

from drf_spectacular.utils import OpenApiParameter
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from delivery.conf import herald
from delivery.engine.accounts import removal, subscribing
from delivery.engine.intake.publishing import Entry, entry_from, message_publish_batch, publish_one
from delivery.engine.plumbing.database import Statement, instance
from delivery.engine.plumbing.errors import ApplicationError
from delivery.web import selectors
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.ownership import OwnedQuerysetMixin, path_key, tenant_of
from delivery.web.api.subscription_serializers import (
    BatchEntrySerializer,
    PublishBatchSerializer,
    PublishedBatchSerializer,
    PublishedSerializer,
    PublishSerializer,
    TopicSerializer,
)
from delivery.web.api.throttling import PublishRateThrottle
from subscriptions.models import Topic

# An owner's topic by id or by name, compiled once per process: every publish asks.
OWN_TOPIC_BY_ID = Statement(lambda owner, pk: Topic.objects.filter(owner_id=owner, pk=pk)[:1], int, int)
OWN_TOPIC_BY_NAME = Statement(lambda owner, name: Topic.objects.filter(owner_id=owner, name=name)[:1], int, str)


def publish_entry(serializer_class, data, *, idempotency_key=None) -> Entry:
    """One publish body, validated: 400 naming the field, 413 for a payload over HERALD_MAX_PAYLOAD_BYTES."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    valid = {name: value for name, value in serializer.validated_data.items() if name != "id"}
    return entry_from(valid, idempotency_key=idempotency_key)


class TopicViewSet(HeraldAPI, OwnedQuerysetMixin, viewsets.ModelViewSet):
    queryset = Topic.objects.all()
    serializer_class = TopicSerializer
    tenant_path = "open"  # a tenant sees its owner's topics open to tenants, and may only read them
    tenant_actions = frozenset({"list", "retrieve"})
    filterset_fields = ["name"]
    ordering_fields = ["id", "name", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    lookup_value_regex = "[^/]+"

    def get_object(self):
        return self.owned_object()

    def owned_object(self):
        """A topic by id or by name (names are the requester's own; a name made of digits is read as an id first)."""
        value = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        key = path_key(value)  # an int for an id; 404 for what no topic can be named by
        numeric = isinstance(key, int)
        user = self.request.user  # an owner's own, through a compiled statement (users keyed by an integer)
        if tenant_of(self.request) is None and user.is_authenticated and not user.is_staff and type(user.pk) is int:
            found = instance(OWN_TOPIC_BY_ID, user.pk, key) if numeric else None
            found = found or instance(OWN_TOPIC_BY_NAME, user.pk, value)
        else:
            topics = self.get_queryset()
            found = topics.filter(pk=key).first() if numeric else None
            if found is None:
                found = topics.filter(owner=user, name=value).first()
        if found is None:
            raise NotFound(f"You have no topic with the id or name {value[:256]!r}.")
        self.check_object_permissions(self.request, found)
        return found

    @extend_schema(responses={201: TopicSerializer, 200: TopicSerializer})
    def create(self, request, *args, **kwargs):
        """Create a topic; creating one you already have (same name, nothing different asked) returns it with 200,
        as SNS CreateTopic does, so scripts can run twice."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        topic, created = subscribing.topic_create(owner=request.user, **serializer.validated_data)
        return Response(TopicSerializer(topic).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def perform_update(self, serializer):
        serializer.instance = subscribing.topic_update(topic=serializer.instance, **serializer.validated_data)

    def perform_destroy(self, instance):
        removal.topic_delete(topic=instance)  # a 409 while any of its deliveries is being sent

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

    @extend_schema(parameters=[OpenApiParameter("window", str, description="e.g. 15m, 24h, 7d (default 24h)")],
                   responses={200: dict})
    @action(detail=True, methods=["get"])
    def metrics(self, request, pk=None):
        topic = self.get_object()
        return Response(selectors.topic_metrics(topic, selectors.parse_window(request.query_params.get("window"))))

"""The API of topics, subscriptions and endpoints: create, read, change and delete them, publish (one message or a
batch), confirm, rotate secrets, redrive, recover, replay, pause and resume. Views validate input and call one
service of delivery/engine; every object is the requester's own (another owner's is a 404)."""

from django_filters.rest_framework import CharFilter, FilterSet, ModelChoiceFilter
from drf_spectacular.utils import OpenApiParameter
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from delivery.conf import herald
from delivery.engine.accounts import recovery, subscribing, tenancy
from delivery.engine.accounts.confirmation import confirmation_resend, subscription_confirm
from delivery.engine.intake import publishing, replay
from delivery.engine.intake.publishing import Entry, entry_from, message_publish_batch, publish_one
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state import health
from delivery.models import Delivery
from delivery.rules.vocabulary import DeliveryStatus
from delivery.web import selectors
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.filters import tenant_filter
from delivery.web.api.message_serializers import DeliverySerializer
from delivery.web.api.ownership import OwnedQuerysetMixin, owned_choices
from delivery.web.api.strict import NoBodySerializer
from delivery.web.api.subscription_serializers import (
    BatchEntrySerializer,
    ConfirmSerializer,
    CountSerializer,
    EndpointDetailSerializer,
    EndpointSerializer,
    PublishBatchSerializer,
    PublishedBatchSerializer,
    PublishedSerializer,
    PublishSerializer,
    RecoverSerializer,
    RedriveSerializer,
    ReplayCreatedSerializer,
    ReplaySerializer,
    RotatedSecretSerializer,
    RotateSecretSerializer,
    SubscriptionCreatedSerializer,
    SubscriptionSerializer,
    SubscriptionUpdateSerializer,
    TopicSerializer,
)
from delivery.web.api.throttling import PublishRateThrottle
from subscriptions.models import Endpoint, Subscription, Topic


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
        topics = self.get_queryset()
        numeric = value.isascii() and value.isdigit() and len(value) < 19
        found = topics.filter(pk=int(value)).first() if numeric else None
        if found is None:
            found = topics.filter(owner=self.request.user, name=value).first()
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
        body = {"message_id": message.id, "deliveries": count, "duplicate": not created}
        return Response(PublishedSerializer(body).data, status=status.HTTP_202_ACCEPTED)

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


class SubscriptionFilter(FilterSet):
    topic = ModelChoiceFilter(queryset=owned_choices(Topic, tenant_path="open"))
    endpoint = CharFilter(field_name="endpoint__url", lookup_expr="icontains")
    tenant = tenant_filter()

    class Meta:
        model = Subscription
        fields = ["topic", "status", "endpoint", "raw_message_delivery", "tenant"]


class SubscriptionViewSet(HeraldAPI, OwnedQuerysetMixin, viewsets.ModelViewSet):
    queryset = Subscription.objects.select_related("topic", "endpoint", "tenant")
    owner_path = "topic__owner"
    tenant_path = "tenant"
    tenant_actions = frozenset({"list", "retrieve", "create", "partial_update", "destroy", "confirm", "replay",
                                "redrive", "recover", "pause", "resume", "metrics", "dead_letters", "rotate_secret",
                                "resend_confirmation", "test"})
    filterset_class = SubscriptionFilter
    ordering_fields = ["id", "created_at", "status"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    serializer_class = SubscriptionSerializer

    def get_serializer_class(self):  # an action's own serializer (its form in the browsable API) comes first
        return SubscriptionUpdateSerializer if self.action == "partial_update" else self.serializer_class

    @extend_schema(responses={201: SubscriptionCreatedSerializer, 200: SubscriptionSerializer})
    def create(self, request, *args, **kwargs):
        """Subscribe an endpoint to a topic (by id or name). The answer holds the signing secret, shown this once.
        Subscribing the same endpoint to the same topic again returns the existing subscription with 200 (without
        its secret; rotate it if it was lost), as SNS does, instead of delivering every event twice."""
        serializer = SubscriptionSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        access = tenancy.tenant_of(request)
        subscription, secret = subscribing.subscription_create(
            topic=data["topic"], endpoint=data["endpoint"]["url"], tenant=access.tenant if access else None,
            delivery_policy=data.get("delivery_policy"),
            filter_policy=data.get("filter_policy"), raw_message_delivery=data.get("raw_message_delivery"),
            signature_scheme=data.get("signature_scheme"), secret=data.get("secret"),
            **{name: data[name] for name in ("client_certificate", "client_key", "client_certificate_expires_at",
                                             "oauth_token_url", "oauth_client_id", "oauth_client_secret",
                                             "oauth_scope", *subscribing.STREAM_OPTIONS) if name in data},
        )
        if secret is None:
            body = SubscriptionSerializer(subscription, context=self.get_serializer_context()).data
            return Response(body, status=status.HTTP_200_OK)
        return Response(SubscriptionCreatedSerializer(subscription, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        if "endpoint" in data:
            data["endpoint"] = data["endpoint"]["url"]
        serializer.instance = subscribing.subscription_update(subscription=serializer.instance, **data)

    @extend_schema(request=ConfirmSerializer, responses={200: SubscriptionSerializer})
    @action(detail=True, methods=["post"], serializer_class=ConfirmSerializer)
    def confirm(self, request, pk=None):
        subscription = self.get_object()
        serializer = ConfirmSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        confirmed = subscription_confirm(token=serializer.validated_data["token"], subscription=subscription)
        return Response(SubscriptionSerializer(confirmed, context=self.get_serializer_context()).data)

    @extend_schema(request=RedriveSerializer, responses={202: CountSerializer})
    @action(detail=True, methods=["post"], serializer_class=RedriveSerializer)
    def redrive(self, request, pk=None):
        """Re-queue the subscription's dead letters with a fresh attempt budget."""
        subscription = self.get_object()  # not yours: 404 before anything about the body
        serializer = RedriveSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        count = recovery.subscription_redrive(subscription=subscription, **serializer.validated_data)
        return Response({"count": count}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ReplaySerializer, responses={202: ReplayCreatedSerializer})
    @action(detail=True, methods=["post"], serializer_class=ReplaySerializer)
    def replay(self, request, pk=None):
        """Deliver the topic's archived messages published in [since, until) to this subscription again, as new
        deliveries marked with the replay (`herald-replay` header), through its filters and, optionally, a filter
        of the replay's own. Messages are kept for the topic's retention."""
        subscription = self.get_object()
        serializer = ReplaySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        created = replay.replay_create(subscription=subscription, requested_by=request.user,
                                       **serializer.validated_data)
        return Response(ReplayCreatedSerializer(created).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=RecoverSerializer, responses={202: CountSerializer})
    @action(detail=True, methods=["post"], serializer_class=RecoverSerializer)
    def recover(self, request, pk=None):
        """Resend everything that failed (dead-lettered or dropped) for messages published since a time."""
        subscription = self.get_object()
        serializer = RecoverSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        count = recovery.subscription_recover(subscription=subscription, **serializer.validated_data)
        return Response({"count": count}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: SubscriptionSerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def pause(self, request, pk=None):
        """Hold new and pending deliveries (their time-to-live still runs) until resumed."""
        paused = recovery.subscription_pause(subscription=self.get_object())
        return Response(SubscriptionSerializer(paused, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses={200: SubscriptionSerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def resume(self, request, pk=None):
        resumed = recovery.subscription_resume(subscription=self.get_object())
        return Response(SubscriptionSerializer(resumed, context=self.get_serializer_context()).data)

    @extend_schema(parameters=[OpenApiParameter("window", str, description="e.g. 15m, 24h, 7d (default 24h)")],
                   responses={200: dict})
    @action(detail=True, methods=["get"])
    def metrics(self, request, pk=None):
        subscription = self.get_object()
        window = selectors.parse_window(request.query_params.get("window"))
        return Response(selectors.subscription_metrics(subscription, window))

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], url_path="dead-letters")
    def dead_letters(self, request, pk=None):
        """Dead letters with their reasons: counts by reason and the newest first (paginated)."""
        subscription = self.get_object()
        dead = Delivery.objects.filter(subscription=subscription, status=DeliveryStatus.DEAD_LETTERED)
        by_reason = selectors.dead_letters_by_reason(dead)
        page = self.paginate_queryset(dead.select_related("endpoint").order_by("-finished_at", "-id"))
        response = self.get_paginated_response(DeliverySerializer(page, many=True).data)
        response.data["by_reason"] = by_reason
        return response

    @extend_schema(request=RotateSecretSerializer, responses={200: RotatedSecretSerializer})
    @action(detail=True, methods=["post"], url_path="rotate-secret", serializer_class=RotateSecretSerializer)
    def rotate_secret(self, request, pk=None):
        """A new signing secret (yours, if you send one); the old one keeps signing beside it for 24 hours."""
        subscription = self.get_object()
        serializer = RotateSecretSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rotated = subscribing.subscription_rotate_secret(subscription=subscription,
                                                         secret=serializer.validated_data.get("secret"))
        return Response(RotatedSecretSerializer(rotated).data)

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def test(self, request, pk=None):
        """Send this subscription alone a test event (`herald.test`, a small example payload), recorded like any
        delivery; a few per hour (HERALD_MAX_TEST_EVENTS_PER_HOUR)."""
        delivery = publishing.test_event(subscription=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: None})
    @action(detail=True, methods=["post"], url_path="resend-confirmation", serializer_class=NoBodySerializer)
    def resend_confirmation(self, request, pk=None):
        confirmation_resend(subscription=self.get_object())
        return Response({"detail": "A new confirmation request is on its way."}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[OpenApiParameter("token", str, required=True)], responses={200: None})
    @action(detail=False, methods=["get"], url_path="confirm", url_name="confirm-by-link",
            permission_classes=[AllowAny], authentication_classes=[])
    def confirm_by_link(self, request):
        subscription = subscription_confirm(token=request.query_params.get("token", ""))
        return Response({"detail": "Subscription confirmed.", "subscription_id": subscription.id})


class EndpointViewSet(HeraldAPI, OwnedQuerysetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    """URL health. `enable` lifts a disable or a freeze by hand: counters reset, held deliveries go out at once."""

    queryset = Endpoint.objects.all()
    tenant_path = "tenant"
    tenant_actions = frozenset({"list", "retrieve", "enable"})  # a tenant fixes its endpoint, then lifts the freeze
    filterset_fields = ["state", "url"]
    ordering_fields = ["id", "consecutive_failures", "last_failure_at"]

    serializer_class = EndpointDetailSerializer

    def get_serializer_class(self):
        return EndpointSerializer if self.action == "list" else self.serializer_class

    @extend_schema(request=None, responses={200: EndpointDetailSerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def enable(self, request, pk=None):
        endpoint = health.endpoint_enable(endpoint=self.get_object(), actor=request.user)
        return Response(EndpointDetailSerializer(endpoint).data)

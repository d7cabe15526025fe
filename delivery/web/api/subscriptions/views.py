"""The API of subscriptions: create, read, change and delete them, confirm, rotate secrets, redrive, recover,
replay, pause and resume, send a test event, test-run a transformation, preview an event version upgrade (their
shapes: shapes.py). Views validate input and call one service of delivery/engine; every subscription is the
requester's own (another owner's is a 404)."""

from django_filters.rest_framework import CharFilter, FilterSet, ModelChoiceFilter
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from delivery.engine.accounts import recovery, removal, signing_secrets, subscribing
from delivery.engine.accounts.confirmation import confirmation_resend, subscription_confirm
from delivery.engine.intake import replay, trial_events
from delivery.models import Delivery
from delivery.rules import subscription_rules
from delivery.rules.vocabulary import DeliveryStatus
from delivery.web import selectors, transformation_trials, version_previews
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.deliveries import DeliverySerializer
from delivery.web.api.filters import tenant_filter
from delivery.web.api.ownership import OwnedQuerysetMixin, owned_choices, tenant_of
from delivery.web.api.strict import NoBodySerializer
from delivery.web.api.subscriptions.shapes import (
    ConfirmSerializer,
    CountSerializer,
    EventVersionPreviewResultSerializer,
    EventVersionPreviewSerializer,
    RecoverSerializer,
    RedriveSerializer,
    ReplayCreatedSerializer,
    ReplaySerializer,
    RotatedSecretSerializer,
    RotateSecretSerializer,
    SubscriptionCreatedSerializer,
    SubscriptionSerializer,
    SubscriptionUpdateSerializer,
    TransformationResultSerializer,
    TransformationTestSerializer,
)
from delivery.web.api.throttling import EventVersionPreviewThrottle, TransformationTestThrottle
from subscriptions.models import Subscription, Topic


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
                                "resend_confirmation", "test", "transformation_test", "event_version_preview"})
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
        access = tenant_of(request)
        subscription, secret = subscribing.subscription_create(
            topic=data["topic"], endpoint=data["endpoint"]["url"], tenant=access.tenant if access else None,
            delivery_policy=data.get("delivery_policy"),
            filter_policy=data.get("filter_policy"), raw_message_delivery=data.get("raw_message_delivery"),
            signature_scheme=data.get("signature_scheme"), secret=data.get("secret"),
            **{name: data[name] for name in (*subscription_rules.CREDENTIALS, *subscription_rules.STREAM_OPTIONS)
               if name in data},
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

    def perform_destroy(self, instance):
        removal.subscription_delete(subscription=instance)  # a 409 while any of its deliveries is being sent

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
        return self._counted(RedriveSerializer, recovery.subscription_redrive)

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
        return self._counted(RecoverSerializer, recovery.subscription_recover)

    def _counted(self, shape, service) -> Response:
        """An action that takes a body and answers how many deliveries `service` queued (202)."""
        subscription = self.get_object()  # not yours: 404 before anything about the body
        serializer = shape(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        count = service(subscription=subscription, **serializer.validated_data)
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

    @extend_schema(responses={200: dict}, paginated=True)
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
        rotated = signing_secrets.subscription_rotate_secret(subscription=subscription,
                                                         secret=serializer.validated_data.get("secret"))
        return Response(RotatedSecretSerializer(rotated).data)

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def test(self, request, pk=None):
        """Send this subscription alone a test event (`herald.test`, a small example payload), recorded like any
        delivery; a few per hour (HERALD_MAX_TEST_EVENTS_PER_HOUR)."""
        delivery = trial_events.test_event(subscription=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=TransformationTestSerializer, responses={200: TransformationResultSerializer})
    @action(detail=True, methods=["post"], url_path="transformation/test", url_name="transformation-test",
            serializer_class=TransformationTestSerializer, throttle_classes=[TransformationTestThrottle])
    def transformation_test(self, request, pk=None):
        """Run a transformation once, sending nothing: the code given (default: the saved one) on a webhook of
        `event_type` (default: the subscription's first event type) carrying `payload` (default: the catalog's
        example of that type), within the limits a send has. 200 with what the handler returned, or why it could
        not (`error`, and its `line` when known); a few a minute (a run costs up to its time limit)."""
        subscription = self.get_object()
        serializer = TransformationTestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        outcome = transformation_trials.trial(subscription, **serializer.validated_data)
        return Response(transformation_trials.answer(outcome))

    @extend_schema(request=EventVersionPreviewSerializer, responses={200: EventVersionPreviewResultSerializer})
    @action(detail=True, methods=["post"], url_path="event-version/preview", url_name="event-version-preview",
            serializer_class=EventVersionPreviewSerializer, throttle_classes=[EventVersionPreviewThrottle])
    def event_version_preview(self, request, pk=None):
        """Preview an upgrade to another event version (docs/versions.md), sending nothing: the subscription's
        latest event of a type with versions (or the catalog's example of its newest version) as the endpoint
        receives it now (`current`) and as it would at `event_version` (`upgraded`), brought down by the catalog's
        down-converters; a converter that fails shows `error` and `line` in place of the payload. Upgrade with
        PATCH {"event_version": ...}. A few a minute (a run costs up to the transformations' time limit per step)."""
        subscription = self.get_object()
        serializer = EventVersionPreviewSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(version_previews.preview(subscription, serializer.validated_data["event_version"]))

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

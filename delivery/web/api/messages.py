"""The API of messages and deliveries (read-only, the requester's own), with each message's fan-out report ("why
did endpoint X not get event Y"), retry now and stop retrying on a delivery, the policy preview, and an Ed25519
subscription's public signing keys."""

import base64

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.engine.accounts import recovery
from delivery.engine.plumbing.errors import ApplicationError
from delivery.engine.state.effective import system_default
from delivery.models import Delivery, Message
from delivery.rules import policy as policies
from delivery.rules import policy_levels, signing
from delivery.web import fanout_report
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.filters import DeliveryFilter, MessageFilter
from delivery.web.api.message_serializers import (
    DeliveryDetailSerializer,
    DeliverySerializer,
    FanoutDecisionSerializer,
    MessageDetailSerializer,
    MessageSerializer,
    PolicyPreviewSerializer,
)
from delivery.web.api.ownership import OwnedQuerysetMixin
from delivery.web.api.strict import NoBodySerializer
from delivery.web.api.subscription_serializers import public_key_of
from subscriptions.models import Subscription
from subscriptions.states import SignatureScheme


class ReadOnlyViewSet(HeraldAPI, OwnedQuerysetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    detail_serializer_class = None

    def get_serializer_class(self):
        if self.action == "retrieve" and self.detail_serializer_class:
            return self.detail_serializer_class
        return self.serializer_class


class MessageViewSet(ReadOnlyViewSet):
    """Published messages. A message's page lists every subscription of its topic with what publishing decided
    (delivery created, filtered out and by which attribute, not confirmed, paused, subscribed after) and where the
    delivery stands; `fanout` pages through all of them."""

    queryset = Message.objects.select_related("topic", "tenant")
    owner_path = "topic__owner"
    serializer_class = MessageSerializer
    detail_serializer_class = MessageDetailSerializer
    filterset_class = MessageFilter
    ordering_fields = ["published_at"]

    @extend_schema(
        parameters=[OpenApiParameter("outcome", enum=fanout_report.OUTCOMES, required=False),
                    OpenApiParameter("subscription", int, required=False)],
        responses={200: FanoutDecisionSerializer(many=True)}, paginated=True)
    @action(detail=True, methods=["get"], filter_backends=[], serializer_class=FanoutDecisionSerializer)
    def fanout(self, request, pk=None):
        """Why each subscription of the topic did or did not get this message, paginated; `?subscription=` answers
        for one, `?outcome=` lists one kind (e.g. `filtered_out`)."""
        message = self.owned_object()
        outcome = request.query_params.get("outcome") or None
        if outcome is not None and outcome not in fanout_report.OUTCOMES:
            raise ApplicationError(f"Use one of: {', '.join(fanout_report.OUTCOMES)}.", field="outcome")
        raw = request.query_params.get("subscription") or None
        if raw is not None and not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
            raise ApplicationError("A subscription id (a positive integer).", field="subscription")
        shown = fanout_report.subscriptions(message, subscription_id=int(raw) if raw else None, outcome=outcome)
        rows = fanout_report.decisions(message, self.paginate_queryset(shown))
        response = self.get_paginated_response(FanoutDecisionSerializer(rows, many=True).data)
        response.data["schema_mismatch"] = message.schema_mismatch  # published all the same (on_mismatch record)
        return response


class DeliveryViewSet(ReadOnlyViewSet):
    """Deliveries with their attempts. `retry` attempts one now."""

    queryset = Delivery.objects.select_related("endpoint").prefetch_related("attempts__exchange")
    owner_path = "subscription__topic__owner"
    tenant_path = "subscription__tenant"
    tenant_actions = frozenset({"list", "retrieve", "retry"})
    serializer_class = DeliverySerializer
    detail_serializer_class = DeliveryDetailSerializer
    filterset_class = DeliveryFilter
    ordering_fields = ["id", "created_at", "next_attempt_at", "last_attempt_at"]

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"], serializer_class=NoBodySerializer)
    def retry(self, request, pk=None):
        """Attempt this delivery now (recorded as a `manual` attempt); a dead letter gets a fresh budget."""
        delivery = recovery.delivery_retry_now(delivery=self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class PolicyPreviewView(HeraldAPI, APIView):
    """The effective policy of a document and the schedule it produces (no jitter; jitter bounds beside), and what
    ends it (`ends`: the maximum of attempts or the time-to-live)."""

    serializer_class = PolicyPreviewSerializer  # the browsable API's form

    def get_serializer(self, *args, **kwargs):
        return self.serializer_class(*args, **kwargs)

    @extend_schema(request=PolicyPreviewSerializer, responses={200: dict})
    def post(self, request):
        serializer = PolicyPreviewSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        document, topic = serializer.validated_data["delivery_policy"], serializer.validated_data.get(
            "topic_delivery_policy")
        if topic is None and policy_levels.is_topic_form(document):  # a topic's, previewed as its subscriptions see it
            document, topic = None, document
        policy_levels.validated(topic, level=policy_levels.TOPIC)
        policy_levels.validated(document, level=policy_levels.SUBSCRIPTION)
        merged, sources, written = policy_levels.merged(document, topic, system_default())
        effective = policies.parse_resolved(merged, written=written)
        rows = effective.schedule()
        for row in rows:
            row["delay_min"] = round(row["delay"] * (1 - effective.jitter), 3)
            row["delay_max"] = round(row["delay"] * (1 + effective.jitter), 3)
        return Response({
            "effective_delivery_policy": effective.document,
            "effective_delivery_policy_sources": sources,
            "max_attempts": effective.max_attempts,
            "max_age_seconds": effective.max_age_seconds,
            "jitter": effective.jitter,
            "schedule": rows,
            "total_seconds": rows[-1]["offset"],
            "ends": effective.schedule_end(rows),
        })


class SigningKeysView(HeraldAPI, APIView):
    """The Ed25519 public keys of one subscription, as a JSON Web Key Set: what receivers verify `v1a` signatures
    with (a key in a rotation's grace period is listed beside the new one). Public, like any public key: no token
    needed. Its address names the subscription by an unguessable id (`signing_keys_url`), never a sequential one,
    and it answers only once the endpoint has confirmed: nothing to enumerate, nothing about who uses Ed25519."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: dict}, auth=[])
    def get(self, request, keys_id):
        now = timezone.now()
        subscription = Subscription.objects.filter(
            keys_id=keys_id, signature_scheme=SignatureScheme.ED25519,
            status__in=(Subscription.Status.CONFIRMED, Subscription.Status.PAUSED)).first()
        if subscription is None:
            raise NotFound("No such key set.")
        current = [("", subscription.secret)]
        if subscription.previous_secret_expires_at and subscription.previous_secret_expires_at > now:
            current.append(("-previous", subscription.previous_secret))
        keys = []
        for suffix, secret in current:
            public = public_key_of(secret)
            if public:
                raw = signing.public_key_bytes(public)
                keys.append({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
                             "kid": f"{public[len(signing.PUBLIC_KEY_PREFIX):][:16]}{suffix}",
                             "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode(), "whpk": public})
        return Response({"keys": keys}, headers={"Cache-Control": "public, max-age=300"})

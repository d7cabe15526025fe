"""The API's policy preview (`/api/policies/preview/`): a delivery policy document (a subscription's or a topic's)
merged as a subscription would have it, with the schedule it produces and what ends it. Nothing is stored."""

from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.engine.state.effective import system_default
from delivery.rules import policy as policies
from delivery.rules import policy_levels
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.strict import StrictInput


class PolicyPreviewSerializer(StrictInput, serializers.Serializer):
    delivery_policy = serializers.JSONField(
        help_text="A policy document or a preset name: a subscription's, or a topic's (SNS's topic form "
                  "{\"http\": {\"defaultHealthyRetryPolicy\": …}} too).")
    topic_delivery_policy = serializers.JSONField(
        required=False, help_text="A topic's policy to preview `delivery_policy` over (as its subscription).")


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

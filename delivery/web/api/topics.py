"""The API of topics: create, read, change and delete them, and their metrics; publishing to one (a message or a
batch) is publishing.py's, taken in here. Views validate input and call one service of delivery/engine; every topic
is the requester's own (another owner's is a 404; a tenant reads its owner's topics open to tenants)."""

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from delivery.engine.accounts import removal, subscribing
from delivery.web import selectors
from delivery.web.api.base import HeraldAPI, extend_schema
from delivery.web.api.ownership import OwnedQuerysetMixin, OwnerTuning, path_key, tenant_of
from delivery.web.api.publishing import PublishActions
from delivery.web.api.strict import StrictInput
from subscriptions.models import Topic


class TopicSerializer(OwnerTuning, StrictInput, serializers.ModelSerializer):
    owner_tuning = ("delivery_policy", "message_retention_days")

    class Meta:
        model = Topic
        fields = ["id", "name", "description", "delivery_policy", "message_retention_days", "open_to_tenants",
                  "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]


class TopicViewSet(HeraldAPI, OwnedQuerysetMixin, PublishActions, viewsets.ModelViewSet):
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
            found = selectors.own_topic(user.pk, key, value)
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

    @extend_schema(parameters=[OpenApiParameter("window", str, description="e.g. 15m, 24h, 7d (default 24h)")],
                   responses={200: dict})
    @action(detail=True, methods=["get"])
    def metrics(self, request, pk=None):
        topic = self.get_object()
        return Response(selectors.topic_metrics(topic, selectors.parse_window(request.query_params.get("window"))))

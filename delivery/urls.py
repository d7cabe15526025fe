"""The REST API: topics, subscriptions, endpoints, messages, deliveries, the policy preview."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from delivery.web.subscription_views import EndpointViewSet, SubscriptionViewSet, TopicViewSet
from delivery.web.views import DeliveryViewSet, MessageViewSet, PolicyPreviewView

router = DefaultRouter(trailing_slash=True)
router.register("topics", TopicViewSet)
router.register("subscriptions", SubscriptionViewSet)
router.register("endpoints", EndpointViewSet)
router.register("messages", MessageViewSet)
router.register("deliveries", DeliveryViewSet)
urlpatterns = [path("policies/preview/", PolicyPreviewView.as_view(), name="policy-preview"), *router.urls]

"""The REST API: topics, subscriptions, endpoints, messages, deliveries, the policy preview."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from delivery.web.subscription_views import EndpointViewSet, SubscriptionViewSet, TopicViewSet
from delivery.web.views import DeliveryViewSet, MessageViewSet, PolicyPreviewView


class HeraldRouter(DefaultRouter):
    """The browsable API's root lists every resource, the non-viewset pages and the docs too."""

    EXTRA = {"policies/preview": "policy-preview", "schema": "schema", "docs": "api-docs", "redoc": "api-redoc"}

    def get_api_root_view(self, api_urls=None):
        names = {prefix: self.routes[0].name.format(basename=basename) for prefix, _, basename in self.registry}
        return self.APIRootView.as_view(api_root_dict={**names, **self.EXTRA})


router = HeraldRouter(trailing_slash=True)
router.register("topics", TopicViewSet)
router.register("subscriptions", SubscriptionViewSet)
router.register("endpoints", EndpointViewSet)
router.register("messages", MessageViewSet)
router.register("deliveries", DeliveryViewSet)
urlpatterns = [path("policies/preview/", PolicyPreviewView.as_view(), name="policy-preview"), *router.urls]

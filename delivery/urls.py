"""Everything Herald serves, under one `include()`: the REST API and its docs, the operators' dashboard and the
Prometheus metrics. Names live in the `herald` namespace (`herald:topic-list`, `herald:dashboard`), so they cannot
clash with a host project's own.

    path("herald/", include("delivery.urls"))    # a host project: /herald/api/…, /herald/dashboard/
    path("", include("delivery.urls"))           # Herald's own project: /api/…, /dashboard/
"""

from django.urls import include, path
from rest_framework.routers import APIRootView, DefaultRouter

from delivery.web.api.base import HeraldAPI
from delivery.web.api.docs import RedocView, SchemaView, SwaggerView, redoc_bundle_view
from delivery.web.api.messages import DeliveryViewSet, MessageViewSet, PolicyPreviewView, SigningKeysView
from delivery.web.api.subscriptions import EndpointViewSet, SubscriptionViewSet, TopicViewSet
from delivery.web.console.dashboard import dashboard
from delivery.web.prometheus import metrics

app_name = "herald"


class RootView(HeraldAPI, APIRootView):
    schema = None  # not an operation of the API


class HeraldRouter(DefaultRouter):
    """The browsable API's root lists every resource, the non-viewset pages and the docs too."""

    APIRootView = RootView
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

docs = [
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", SwaggerView.as_view(url_name="herald:schema"), name="api-docs"),
    path("redoc/", RedocView.as_view(url_name="herald:schema"), name="api-redoc"),
    path("redoc/redoc.standalone.js", redoc_bundle_view, name="api-redoc-bundle"),
]
urlpatterns = [
    path("api/", include([path("policies/preview/", PolicyPreviewView.as_view(), name="policy-preview"),
                          path("keys/<uuid:keys_id>/jwks.json", SigningKeysView.as_view(), name="signing-keys"),
                          *docs, *router.urls])),
    path("dashboard/", dashboard, name="dashboard"),
    path("metrics", metrics, name="metrics"),
]

"""Everything Herald serves, under one `include()`: the REST API and its docs, the operators' dashboard and the
Prometheus metrics. Names live in the `herald` namespace (`herald:topic-list`, `herald:dashboard`), so they cannot
clash with a host project's own.

    path("herald/", include("delivery.urls"))    # a host project: /herald/api/…, /herald/dashboard/
    path("", include("delivery.urls"))           # Herald's own project: /api/…, /dashboard/
"""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny
from rest_framework.routers import DefaultRouter

from delivery.web.dashboard import dashboard
from delivery.web.prometheus import metrics
from delivery.web.subscription_views import EndpointViewSet, SubscriptionViewSet, TopicViewSet
from delivery.web.views import DeliveryViewSet, MessageViewSet, PolicyPreviewView

app_name = "herald"


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

# The API's description is public; every operation in it still needs a token. Swagger UI and ReDoc come from the
# static files of drf-spectacular-sidecar: they work without internet.
docs = [
    path("schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="herald:schema", permission_classes=[AllowAny]),
         name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="herald:schema", permission_classes=[AllowAny],
                                                template_name="herald/redoc.html"), name="api-redoc"),
]
urlpatterns = [
    path("api/", include([path("policies/preview/", PolicyPreviewView.as_view(), name="policy-preview"), *docs,
                          *router.urls])),
    path("dashboard/", dashboard, name="dashboard"),
    path("metrics", metrics, name="metrics"),
]

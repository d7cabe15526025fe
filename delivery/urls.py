"""Everything Herald serves, under one `include()`: the REST API and its docs, the operators' dashboard and the
Prometheus metrics. Names live in the `herald` namespace (`herald:topic-list`, `herald:dashboard`), so they cannot
clash with a host project's own.

    path("herald/", include("delivery.urls"))    # a host project: /herald/api/…, /herald/dashboard/
    path("", include("delivery.urls"))           # Herald's own project: /api/…, /dashboard/
"""

from django.urls import include, path
from rest_framework.routers import APIRootView, DefaultRouter

from delivery import VERSION
from delivery.web import probes
from delivery.web.api.base import HeraldAPI
from delivery.web.api.deliveries import DeliveryViewSet
from delivery.web.api.docs import RedocView, SchemaView, SwaggerView, redoc_bundle_view
from delivery.web.api.endpoints import EndpointViewSet
from delivery.web.api.event_types import EventTypeViewSet
from delivery.web.api.messages import MessageViewSet
from delivery.web.api.policy_preview import PolicyPreviewView
from delivery.web.api.portal_settings import PortalSettingsView
from delivery.web.api.signing_keys import SigningKeysView
from delivery.web.api.subscriptions.views import SubscriptionViewSet
from delivery.web.api.tenants import TenantViewSet
from delivery.web.api.topics import TopicViewSet
from delivery.web.console.dashboard import dashboard
from delivery.web.portal import access, pages
from delivery.web.prometheus import metrics

app_name = "herald"


class RootView(HeraldAPI, APIRootView):
    schema = None  # not an operation of the API

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        response.data = {"version": VERSION, **response.data}  # which Herald answers (CHANGELOG.md)
        return response


class HeraldRouter(DefaultRouter):
    """The browsable API's root lists every resource, the non-viewset pages and the docs too."""

    APIRootView = RootView
    EXTRA = {"portal": "portal-settings",
             "policies/preview": "policy-preview", "schema": "schema", "docs": "api-docs", "redoc": "api-redoc"}

    def get_api_root_view(self, api_urls=None):
        names = {prefix: self.routes[0].name.format(basename=basename) for prefix, _, basename in self.registry}
        return self.APIRootView.as_view(api_root_dict={**names, **self.EXTRA})


router = HeraldRouter(trailing_slash=True)
router.register("topics", TopicViewSet)
router.register("subscriptions", SubscriptionViewSet)
router.register("endpoints", EndpointViewSet)
router.register("messages", MessageViewSet)
router.register("deliveries", DeliveryViewSet)
router.register("tenants", TenantViewSet)
router.register("event-types", EventTypeViewSet)

docs = [
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", SwaggerView.as_view(url_name="herald:schema"), name="api-docs"),
    path("redoc/", RedocView.as_view(url_name="herald:schema"), name="api-redoc"),
    path("redoc/redoc.standalone.js", redoc_bundle_view, name="api-redoc-bundle"),
]
urlpatterns = [
    path("api/", include([path("policies/preview/", PolicyPreviewView.as_view(), name="policy-preview"),
                          path("portal/", PortalSettingsView.as_view(), name="portal-settings"),
                          path("keys/<uuid:keys_id>/jwks.json", SigningKeysView.as_view(), name="signing-keys"),
                          *docs, *router.urls])),
    path("dashboard/", dashboard, name="dashboard"),
    path("portal/<str:token>/", include([
        path("", pages.home, name="portal-home"),
        path("event-types/", pages.event_types, name="portal-event-types"),
        path("subscriptions/new/", pages.subscription_new, name="portal-subscription-new"),
        path("subscriptions/<int:subscription_id>/", pages.subscription_detail, name="portal-subscription"),
        path("subscriptions/<int:subscription_id>/<str:name>/", pages.subscription_action,
             name="portal-subscription-action"),
        # The same pages at their addresses before 2026-11 (a page opened before an upgrade keeps working).
        path("endpoints/new/", pages.subscription_new),
        path("endpoints/<int:subscription_id>/", pages.subscription_detail),
        path("endpoints/<int:subscription_id>/<str:name>/", pages.subscription_action),
        path("deliveries/<int:delivery_id>/", pages.delivery_detail, name="portal-delivery"),
        path("deliveries/<int:delivery_id>/retry/", pages.delivery_retry, name="portal-retry"),
        path("<path:rest>", access.not_found, name="portal-not-found"),  # a 404 with the portal's headers
    ])),
    path("metrics", metrics, name="metrics"),
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
]

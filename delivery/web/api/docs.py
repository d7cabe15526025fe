"""The API's description and its two readers, configured here rather than by SPECTACULAR_SETTINGS so they are the
same inside a host project: Swagger UI and ReDoc from drf-spectacular-sidecar's static files (no CDN: they work
offline)."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.settings import patched_settings
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from delivery.conf import VERSION
from delivery.web.api.base import extend_schema

SCHEMA = {
    "TITLE": "Herald API",
    "DESCRIPTION": "Publish events to topics; Herald delivers them to every subscriber's webhook.",
    "VERSION": VERSION,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "DeliveryStatusEnum": "delivery.models.DeliveryStatus",
        "SubscriptionStatusEnum": "subscriptions.models.Subscription.Status",
    },
}
READERS = {"SWAGGER_UI_DIST": "SIDECAR", "SWAGGER_UI_FAVICON_HREF": "SIDECAR", "REDOC_DIST": "SIDECAR"}


class SchemaView(SpectacularAPIView):
    """The OpenAPI description is public; every operation in it still needs a token."""

    schema = AutoSchema()  # drf-spectacular's, whatever the project's DEFAULT_SCHEMA_CLASS (it excludes these views)
    permission_classes = [AllowAny]
    custom_settings = SCHEMA

    @extend_schema(exclude=True)  # these three pages are not operations of the API
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class SwaggerView(SpectacularSwaggerView):
    schema = AutoSchema()
    permission_classes = [AllowAny]

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        with patched_settings(READERS):
            return super().get(request, *args, **kwargs)


class RedocView(SpectacularRedocView):
    schema = AutoSchema()
    permission_classes = [AllowAny]
    template_name = "herald/redoc.html"  # without Google's web fonts

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        with patched_settings(READERS):
            return super().get(request, *args, **kwargs)

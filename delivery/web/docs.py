"""The API's description and its two readers, configured here rather than by SPECTACULAR_SETTINGS so they are the
same inside a host project: Swagger UI and ReDoc from drf-spectacular-sidecar's static files (no CDN: they work
offline)."""

from drf_spectacular.settings import patched_settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from delivery.conf import VERSION

SCHEMA = {
    "TITLE": "Herald API",
    "DESCRIPTION": "Publish events to topics; Herald delivers them to every subscriber's webhook.",
    "VERSION": VERSION,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "DeliveryStatusEnum": "delivery.models.Delivery.Status",
        "SubscriptionStatusEnum": "subscriptions.models.Subscription.Status",
    },
}
READERS = {"SWAGGER_UI_DIST": "SIDECAR", "SWAGGER_UI_FAVICON_HREF": "SIDECAR", "REDOC_DIST": "SIDECAR"}


OUT_OF_THE_SCHEMA = extend_schema_view(get=extend_schema(exclude=True))


@OUT_OF_THE_SCHEMA
class SchemaView(SpectacularAPIView):
    """The OpenAPI description is public; every operation in it still needs a token."""

    permission_classes = [AllowAny]
    custom_settings = SCHEMA


@OUT_OF_THE_SCHEMA
class SwaggerView(SpectacularSwaggerView):
    permission_classes = [AllowAny]

    def get(self, request, *args, **kwargs):
        with patched_settings(READERS):
            return super().get(request, *args, **kwargs)


@OUT_OF_THE_SCHEMA
class RedocView(SpectacularRedocView):
    permission_classes = [AllowAny]
    template_name = "herald/redoc.html"  # without Google's web fonts

    def get(self, request, *args, **kwargs):
        with patched_settings(READERS):
            return super().get(request, *args, **kwargs)

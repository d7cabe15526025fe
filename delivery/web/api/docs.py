"""The API's description and its two readers, configured here rather than by SPECTACULAR_SETTINGS so they are the
same inside a host project: Swagger UI and ReDoc from drf-spectacular-sidecar's static files (no CDN: they work
offline)."""

from functools import cache
from pathlib import Path

import drf_spectacular_sidecar
from django.http import HttpResponse
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
REDOC_BUNDLE = (Path(drf_spectacular_sidecar.__file__).parent / "static" / "drf_spectacular_sidecar" / "redoc" /
                "bundles" / "redoc.standalone.js")
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"  # the one address of another host in ReDoc's bundle
BLANK_SVG = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/%3E"


@cache
def redoc_bundle() -> bytes:
    """ReDoc's bundle with its footer logo made a blank inline image: the docs page asks no other host for
    anything (read once per process)."""
    return REDOC_BUNDLE.read_bytes().replace(REDOC_LOGO.encode(), BLANK_SVG.encode())


def redoc_bundle_view(request):
    return HttpResponse(redoc_bundle(), content_type="application/javascript; charset=utf-8",
                        headers={"Cache-Control": "public, max-age=86400"})


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

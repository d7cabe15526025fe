from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from delivery.web.dashboard import dashboard
from delivery.web.prometheus import metrics

urlpatterns = [
    path("admin/rq/", include("django_rq.urls")),
    path("admin/dashboard/", dashboard, name="herald-dashboard"),
    path("metrics", metrics, name="prometheus-metrics"),
    path("admin/", admin.site.urls),
    path("api/", include("delivery.urls")),
    # The API's description is public; every operation in it still needs a token.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[AllowAny]),
         name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema", permission_classes=[AllowAny],
                                                    template_name="herald/redoc.html"),
         name="api-redoc"),
    # The admin's "View site" and a bare `/` lead to the operator's dashboard (the login page first).
    path("", RedirectView.as_view(pattern_name="herald-dashboard", permanent=False), name="herald-home"),
]

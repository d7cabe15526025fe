from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/rq/", include("django_rq.urls")),
    path("admin/dashboard/", RedirectView.as_view(pattern_name="herald:dashboard", permanent=False)),  # old address
    path("admin/", admin.site.urls),
    path("", include("delivery.urls")),
    # The admin's "View site" and a bare `/` lead to the operator's dashboard (the login page first).
    path("", RedirectView.as_view(pattern_name="herald:dashboard", permanent=False), name="herald-home"),
]

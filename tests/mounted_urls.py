"""Herald mounted under /herald/, as a host project may mount it (tests/delivery/web/api/test_list_parameters.py)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [path("admin/", admin.site.urls), path("herald/", include("delivery.urls"))]

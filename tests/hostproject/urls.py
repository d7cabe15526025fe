from django.contrib import admin
from django.urls import include, path

from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("herald/", include("delivery.urls")),  # Herald's API, docs, dashboard and metrics
    path("orders/", views.place_order),
    path("hooks/orders/", views.order_events),
    path("account/<int:customer_id>/webhooks/", views.webhooks_settings),
    path("customers/<int:customer_id>/hook/", views.customer_events),
]

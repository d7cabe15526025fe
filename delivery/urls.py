from django.urls import path
from rest_framework.routers import DefaultRouter

from .views import DeliveryViewSet, MessageViewSet, PolicyPreviewView

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("messages", MessageViewSet)
router.register("deliveries", DeliveryViewSet)
urlpatterns = [path("policies/preview/", PolicyPreviewView.as_view(), name="policy-preview"), *router.urls]

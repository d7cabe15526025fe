from rest_framework.routers import DefaultRouter

from .views import EndpointViewSet, SubscriptionViewSet, TopicViewSet

router = DefaultRouter()
router.register("topics", TopicViewSet)
router.register("subscriptions", SubscriptionViewSet)
router.register("endpoints", EndpointViewSet)
urlpatterns = router.urls

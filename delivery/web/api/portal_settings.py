"""The API of the tenant portal's settings (docs/tenants.md): its name, logo and colour, which of the owner's apps
may frame it, where an expired link sends the browser, and whether tenants may write transformations."""


from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.engine.accounts import tenancy
from delivery.web.api.base import HeraldAPI
from delivery.web.api.strict import StrictInput
from subscriptions.models import Portal


class PortalSerializer(StrictInput, serializers.ModelSerializer):
    """The settings' shapes; their rules are the service's (tenancy.portal_update), the admin's too."""

    class Meta:
        model = Portal
        fields = list(tenancy.PORTAL_FIELDS)


class PortalSettingsView(HeraldAPI, APIView):
    """How your tenants' portal looks (name, logo, colour), which of your apps may frame it, and where an expired
    link leads a browser for a fresh one (refresh_url: a link on the expired link's page, or a redirect on a host
    the operator allows in HERALD_PORTAL_REFRESH_HOSTS), and whether your tenants may write transformations for
    their endpoints (allow_transformations: in the portal, and with their keys through the API)."""

    serializer_class = PortalSerializer

    def get(self, request):
        portal, _ = Portal.objects.get_or_create(owner=request.user)
        return Response(PortalSerializer(portal).data)

    def patch(self, request):
        serializer = PortalSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        portal = tenancy.portal_update(owner=request.user, **serializer.validated_data)
        return Response(PortalSerializer(portal).data)

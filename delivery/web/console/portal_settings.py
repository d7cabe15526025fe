"""The operator console's page of each owner's portal settings, written through the service the API calls
(tenancy.portal_update, console/service_forms.py), which asks the rules (rules/portal_settings.py)."""

from django.contrib import admin

from delivery.engine.accounts import tenancy
from delivery.web.console.service_forms import ServiceAdmin, ServiceForm
from subscriptions.models import Portal


class PortalForm(ServiceForm):
    """Written through the API's service (tenancy.portal_update), which asks the rules (rules/portal_settings.py):
    frame_ancestors go into a header of every portal answer; allow_transformations opens the portal's editor."""

    class Meta:
        model = Portal
        fields = ["owner", *tenancy.PORTAL_FIELDS]

    def create(self, changes):
        return tenancy.portal_update(owner=changes.pop("owner"), **changes)

    def write(self, stored, changes):
        return tenancy.portal_update(owner=stored.owner, **changes)


@admin.register(Portal)
class PortalAdmin(ServiceAdmin, admin.ModelAdmin):
    form = PortalForm
    list_display = ["owner", "name", "colour", "refresh_url", "allow_transformations"]

    def get_readonly_fields(self, request, obj=None):
        return ["owner"] if obj is not None else []

    def has_delete_permission(self, request, obj=None):
        return False  # changed, never deleted (as through the API)

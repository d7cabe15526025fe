"""The operator console's pages of the event type catalog: written through the services the API calls
(engine/accounts/event_types.py; console/service_forms.py), and deletes the service refuses shown as such."""


from django.contrib import admin

from delivery.engine.accounts import event_types
from delivery.web.console.deletes import RefusedDeletesShown
from delivery.web.console.service_forms import ServiceAdmin, ServiceForm
from subscriptions.models import EventType


class EventTypeForm(ServiceForm):
    """Written through the API's services (engine/accounts/event_types.py), which hold its rules: a name a publish
    may use, a bounded description, a valid schema, an example that matches it, a schema to validate against; no
    rename under tenants that chose it."""

    class Meta:
        model = EventType
        fields = ["owner", *event_types.FIELDS]

    def create(self, changes):
        return event_types.event_type_create(owner=changes.pop("owner"), **changes)

    def write(self, stored, changes):
        return event_types.event_type_update(event_type=stored, **changes)


@admin.register(EventType)
class EventTypeAdmin(ServiceAdmin, RefusedDeletesShown, admin.ModelAdmin):
    form = EventTypeForm
    list_display = ["name", "owner", "open_to_tenants", "validate_payloads", "deprecated"]
    list_filter = ["owner", "open_to_tenants", "deprecated"]
    search_fields = ["name", "description"]

    def get_readonly_fields(self, request, obj=None):
        return ["owner"] if obj is not None else []

    def delete_model(self, request, obj):
        event_types.event_type_delete(event_type=obj)

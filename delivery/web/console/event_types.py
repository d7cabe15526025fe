"""The operator console's pages of the event type catalog: the API's rules through the same service
(engine/accounts/event_types.py), and deletes the service refuses shown as such."""


from django import forms
from django.contrib import admin

from delivery.engine.accounts import event_types
from delivery.web.console.tenants import RefusedDeletesShown
from subscriptions.models import EventType


class EventTypeForm(forms.ModelForm):
    """The API's rules (engine/accounts/event_types.py): a name a publish may use, a bounded description, a valid
    schema, an example that matches it, a schema to validate against; no rename under tenants that chose it."""

    class Meta:
        model = EventType
        fields = ["owner", *event_types.FIELDS]

    def clean(self):
        data = super().clean()
        stored = self.instance if self.instance.pk else None
        changes = {name: data[name] for name in event_types.FIELDS if name in data
                   and (stored is None or name in self.changed_data)}
        for name, reason in event_types.problems(changes=changes, event_type=stored).items():
            self.add_error(name if name in self.fields else None, reason)
        if stored is not None and "name" in changes and not self.errors:
            refusal = event_types.in_use_refusal(EventType.objects.get(pk=stored.pk), "renaming")
            if refusal:
                self.add_error("name", refusal.message)
        return data


@admin.register(EventType)
class EventTypeAdmin(RefusedDeletesShown, admin.ModelAdmin):
    form = EventTypeForm
    list_display = ["name", "owner", "open_to_tenants", "validate_payloads", "deprecated"]
    list_filter = ["owner", "open_to_tenants", "deprecated"]
    search_fields = ["name", "description"]

    def get_readonly_fields(self, request, obj=None):
        return ["owner"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        """Through the services the API calls."""
        if change:
            stored = EventType.objects.get(pk=obj.pk)
            form.instance = event_types.event_type_update(event_type=stored, **{
                name: form.cleaned_data[name] for name in form.changed_data if name in event_types.FIELDS})
        else:
            form.instance = event_types.event_type_create(owner=obj.owner, **{
                name: form.cleaned_data[name] for name in event_types.FIELDS if name in form.cleaned_data})
        obj.pk = form.instance.pk  # the admin's answer names the row the service saved

    def delete_model(self, request, obj):
        event_types.event_type_delete(event_type=obj)

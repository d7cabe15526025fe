"""The operator console's page of each owner's portal settings, saved through the service the API calls
(tenancy.portal_update) and checked by the same rules (rules/portal_settings.py)."""

from django import forms
from django.contrib import admin

from delivery.engine.accounts import tenancy
from delivery.rules import portal_settings
from subscriptions.models import Portal


class PortalForm(forms.ModelForm):
    """The API's rules (rules/portal_settings.py): frame_ancestors go into a header of every portal answer."""

    class Meta:
        model = Portal
        fields = ["owner", *tenancy.PORTAL_FIELDS]

    def clean(self):
        data = super().clean()
        for name, reason in portal_settings.problems({name: data[name] for name in portal_settings.CHECKS
                                                      if name in data}).items():
            self.add_error(name, reason)
        return data


@admin.register(Portal)
class PortalAdmin(admin.ModelAdmin):
    form = PortalForm
    list_display = ["owner", "name", "colour", "refresh_url"]

    def get_readonly_fields(self, request, obj=None):
        return ["owner"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        """Through the service the API calls."""
        form.instance = tenancy.portal_update(owner=obj.owner, **{name: form.cleaned_data[name]
                                                                  for name in tenancy.PORTAL_FIELDS})
        obj.pk = form.instance.pk  # the admin's answer names the row the service saved

"""The operator console's pages of tenants (docs/tenants.md): register and edit them, their keys (a new key is
shown once, in the message after saving; revoking is an action), a portal link for support, the event catalog and
each owner's portal settings."""

from datetime import timedelta
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from delivery.engine.accounts import event_types, tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules import portal_settings
from subscriptions.models import EventType, Portal, Tenant, TenantKey


class TenantKeyInline(admin.TabularInline):
    model = TenantKey
    extra = 0
    fields = ["prefix", "name", "read_only", "created_at", "revoked_at"]
    readonly_fields = ["prefix", "name", "read_only", "created_at", "revoked_at"]
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False  # keys are made by the "new API key" action, which shows the key once


class RefusedDeletesShown:
    """A delete the service refuses (an ApplicationError: a 409 through the API) is shown on the object's page
    instead of failing the request; nothing was deleted."""

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            opts = self.model._meta
            return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[object_id]))

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            try:
                self.delete_model(request, obj)
            except ApplicationError as exc:
                self.message_user(request, f"{obj}: {exc.message}", messages.ERROR)


@admin.register(Tenant)
class TenantAdmin(RefusedDeletesShown, admin.ModelAdmin):
    list_display = ["external_id", "name", "owner", "subscriptions", "created_at"]
    list_filter = ["owner"]
    search_fields = ["external_id", "name"]
    inlines = [TenantKeyInline]
    actions = ["new_key", "portal_link"]

    def delete_model(self, request, obj):
        tenancy.tenant_delete(tenant=obj)

    def get_deleted_objects(self, objs, request):
        """What goes with a tenant is the service's to delete (tenancy.tenant_delete, as through the API): its
        subscriptions first (nothing else protects its endpoints), their deliveries and attempts (records no one
        deletes by hand) with them."""
        deleted, counts, _, _ = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), []

    @admin.display(description="subscriptions")
    def subscriptions(self, tenant):
        return tenant.subscriptions.count()

    @admin.action(description="Create an API key for the selected tenants (shown once)")
    def new_key(self, request, queryset):
        for tenant in queryset[:20]:
            try:
                _, plaintext = tenancy.tenant_key_create(tenant=tenant, name=f"made by {request.user}")
            except ApplicationError as exc:
                self.message_user(request, f"{tenant}: {exc.message}", messages.WARNING)
                continue
            self.message_user(request, format_html("{}: <code>{}</code> (copy it now: it is not shown again)",
                                                   tenant, plaintext), messages.SUCCESS)

    @admin.action(description="Open a read-only portal link for the selected tenant (15 minutes)")
    def portal_link(self, request, queryset):
        for tenant in queryset[:5]:
            # On the admin's own host: the operator is here, whatever HERALD_PUBLIC_URL says tenants reach.
            path = urlsplit(tenancy.portal_link(tenant, ttl=timedelta(minutes=15), read_only=True)).path
            self.message_user(request, format_html('{}: <a href="{}" target="_blank" rel="noreferrer">the portal, '
                                                   'read-only</a>', tenant, path), messages.SUCCESS)


@admin.register(TenantKey)
class TenantKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "tenant", "name", "read_only", "created_at", "revoked_at"]
    list_filter = ["read_only"]
    search_fields = ["prefix", "tenant__external_id"]
    readonly_fields = ["tenant", "prefix", "created_at", "revoked_at"]
    fields = ["tenant", "prefix", "name", "read_only", "created_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset):
        now = timezone.now()
        for key in queryset:
            tenancy.tenant_key_revoke(key=key, now=now)
        self.message_user(request, f"{queryset.count()} key(s) revoked.", messages.SUCCESS)


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

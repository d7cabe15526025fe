"""The operator console's pages of tenants (docs/tenants.md): register and edit them, their keys (a new key is
shown once, in the message after saving; revoking is an action), a portal link for support. The catalog's pages
are console/event_types.py, the portal's settings console/portal_settings.py."""

from datetime import timedelta
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from delivery.engine.accounts import tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.web.console.deletes import ServiceDeletes
from delivery.web.console.service_forms import ServiceAdmin, ServiceForm
from subscriptions.models import Tenant, TenantKey


class TenantForm(ServiceForm):
    """Written through the API's services (tenancy.tenant_create/tenant_update), which hold a tenant's rules."""

    class Meta:
        model = Tenant
        fields = ["owner", "external_id", "name", "metadata"]

    def create(self, changes):
        return self.new_only(tenancy.tenant_create(**changes), "external_id",
                             lambda tenant: f"{tenant.owner} already has a tenant {tenant.external_id!r}.")

    def write(self, stored, changes):
        return tenancy.tenant_update(tenant=stored, **changes)


@admin.register(Tenant)
class TenantAdmin(ServiceAdmin, ServiceDeletes, admin.ModelAdmin):
    form = TenantForm
    list_display = ["external_id", "name", "owner", "subscriptions", "created_at"]
    list_filter = ["owner"]
    search_fields = ["external_id", "name"]
    readonly_fields = ["keys_shown"]
    actions = ["new_key", "portal_link"]

    def get_readonly_fields(self, request, obj=None):
        return ["owner", "external_id", "keys_shown"] if obj is not None else []  # what publishes name it by

    @admin.display(description="API keys")
    def keys_shown(self, tenant):
        """Its keys, read-only (made by the "new API key" action, shown once; revoked on the keys' page)."""
        keys = list(tenant.keys.order_by("id")[:100]) if tenant.pk else []
        if not keys:
            return "none (the “Create an API key” action makes one)"
        return format_html_join("", "<div><code>{}…</code> {}{}{}</div>", (
            (key.prefix, key.name, " · read-only" if key.read_only else "",
             f" · revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "") for key in keys))

    def delete_model(self, request, obj):
        tenancy.tenant_delete(tenant=obj)  # its subscriptions first (nothing else protects its endpoints)

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
    fields = ["tenant", "prefix", "name", "read_only", "created_at", "revoked_at"]
    readonly_fields = fields  # as through the API, a key is made (read-only or not) and revoked, never changed
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # revoked, never deleted (as through the API)

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset):
        now = timezone.now()
        for key in queryset:
            tenancy.tenant_key_revoke(key=key, now=now)
        self.message_user(request, f"{queryset.count()} key(s) revoked.", messages.SUCCESS)

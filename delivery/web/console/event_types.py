"""The operator console's pages of the event type catalog: written through the services the API calls
(engine/accounts/event_types.py; console/service_forms.py), and deletes the service refuses shown as such. A type's
versions (docs/versions.md) have a page of their own, linked from the type's: added through the service, after the
others, and never changed or deleted there (a version's payloads may already be on their way)."""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from delivery.engine.accounts import event_types
from delivery.engine.plumbing.errors import ApplicationError
from delivery.web.console.deletes import RefusedDeletesShown
from delivery.web.console.service_forms import ServiceAdmin, ServiceForm
from subscriptions.models import EventType, EventTypeVersion

VERSIONS = "admin:herald_subscriptions_eventtypeversion"
DOWN_CONVERTER = ("function handler(webhook) {\n  // turn webhook.payload of this version into one of the version "
                  "before it\n  return webhook;\n}")


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
    list_display = ["name", "owner", "open_to_tenants", "validate_payloads", "deprecated", "latest_version"]
    list_filter = ["owner", "open_to_tenants", "deprecated"]
    search_fields = ["name", "description"]

    def get_readonly_fields(self, request, obj=None):
        return ["owner", "versions_shown"] if obj is not None else []

    def delete_model(self, request, obj):
        event_types.event_type_delete(event_type=obj)

    @admin.display(description="latest version")
    def latest_version(self, obj):
        return max((version.name for version in obj.versions.all()), default="—")

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("versions")

    @admin.display(description="versions")
    def versions_shown(self, obj):
        """Its versions, oldest first, each a link to its page; and the link that adds the next."""
        rows = format_html_join("", '<li><a href="{}">{}</a></li>', (
            (reverse(f"{VERSIONS}_change", args=[version.pk]), version.name)
            for version in sorted(obj.versions.all(), key=lambda version: version.name)))
        add = format_html('<a class="addlink" href="{}?event_type={}">Add a version</a>', reverse(f"{VERSIONS}_add"),
                          obj.pk)
        return format_html("<ul>{}</ul>{}", rows, add) if rows else format_html("none yet. {}", add)


class EventTypeVersionForm(ServiceForm):
    """A new version, written through the API's service (event_types.event_version_create), which holds its rules:
    a name after the type's others, a schema and an example as an entry's, a down-converter that compiles (none for
    the first version)."""

    class Meta:
        model = EventTypeVersion
        fields = ["event_type", "name", "schema", "example", "down_converter"]
        widgets = {"down_converter": forms.Textarea(attrs={
            "rows": 12, "cols": 90, "spellcheck": "false", "style": "font-family: monospace",
            "placeholder": DOWN_CONVERTER})}

    def create(self, changes):
        changes["down_converter"] = (changes.get("down_converter") or "").replace("\r\n", "\n")  # a textarea's CRLF
        return event_types.event_version_create(**changes)

    def write(self, stored, changes):
        raise ApplicationError("a version does not change once registered: add a new one", field="name")


@admin.register(EventTypeVersion)
class EventTypeVersionAdmin(ServiceAdmin, admin.ModelAdmin):
    """Versions are added here and read; never changed or deleted (their payloads may already be on their way)."""

    form = EventTypeVersionForm
    list_display = ["event_type", "name", "owner", "created_at"]
    list_filter = ["event_type__owner"]
    search_fields = ["event_type__name", "name"]
    list_select_related = ["event_type__owner"]
    ordering = ["event_type__name", "name"]

    @admin.display(description="owner", ordering="event_type__owner")
    def owner(self, obj):
        return obj.event_type.owner

    def has_change_permission(self, request, obj=None):
        return False  # read (view permission), never changed

    def has_delete_permission(self, request, obj=None):
        return False

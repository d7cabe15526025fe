"""Deleting from the operator console through the services the API calls (engine/accounts/removal.py for topics
and subscriptions, tenancy.tenant_delete, event_types.event_type_delete): a page's delete and the list's
"Delete selected" action both reach the page's `delete_model`, which calls its service, and a delete the service
refuses is shown as a message, nothing deleted (tests/test_structure.py finds a page that deletes otherwise)."""

from django.contrib import messages
from django.http import HttpResponseRedirect
from django.urls import reverse

from delivery.engine.plumbing.errors import ApplicationError


class RefusedDeletesShown:
    """A delete the service refuses (an ApplicationError: a 409 through the API) is shown on the object's page
    instead of failing the request; nothing was deleted. The list's bulk delete goes row by row through
    `delete_model` (the page's service), each refusal shown, the others deleted."""

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


class ServiceDeletes(RefusedDeletesShown):
    """For rows that take records with them: what goes with a tenant, a topic or a subscription (deliveries,
    attempts: records no one deletes by hand) is the service's to delete, so the confirmation page lists it without
    asking for permission to delete those records."""

    def get_deleted_objects(self, objs, request):
        deleted, counts, _, _ = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), []

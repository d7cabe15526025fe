"""The lists' actions ("Redrive dead letters of selected subscriptions", "Freeze selected endpoints"): each calls one
service per selected row, the same services as the API and the pages' buttons (console/buttons.py)."""

from django.contrib import messages

from delivery.engine.plumbing.errors import ApplicationError


def run_service(modeladmin, request, queryset, service, done: str, **kwargs) -> None:
    """An admin action: call `service` once per selected object (as `<model>=obj`), report refusals, count the rest
    (a service that returns a number, such as a redrive, counts that many)."""
    count = 0
    for obj in queryset:
        try:
            result = service(**{obj._meta.model_name: obj}, **kwargs)
        except ApplicationError as exc:
            modeladmin.message_user(request, f"{obj}: {exc.message}", messages.WARNING)
            continue
        count += result if isinstance(result, int) and not isinstance(result, bool) else 1
    modeladmin.message_user(request, done.format(count), messages.SUCCESS)

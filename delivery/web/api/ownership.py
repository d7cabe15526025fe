"""Every object belongs to an owner: others get 404 (never 403, which would leak that it exists); staff see all."""

from rest_framework.generics import get_object_or_404


class OwnedQuerysetMixin:
    owner_path = "owner"  # the lookup from the model to its owning user

    def get_queryset(self):
        queryset = super().get_queryset()
        user = self.request.user
        if getattr(self, "swagger_fake_view", False) or not user.is_authenticated:
            return queryset.none()
        if user.is_staff:
            return queryset
        return queryset.filter(**{self.owner_path: user})

    def owned_object(self):
        """`get_object()` without the list filters (django-filter, ordering), which an action on one object does
        not use: on the publish path they cost more than the lookup."""
        obj = get_object_or_404(self.get_queryset(), pk=self.kwargs[self.lookup_url_kwarg or self.lookup_field])
        self.check_object_permissions(self.request, obj)
        return obj


def owned_choices(model, owner_path: str = "owner"):
    """For a filter on a related object: the choices are the requester's own objects (all of them for staff), so
    another owner's id is refused exactly like an id that does not exist."""

    def choices(request):
        queryset = model.objects.all()
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return queryset.none()
        return queryset if user.is_staff else queryset.filter(**{owner_path: user})

    return choices

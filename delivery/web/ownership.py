"""Every object belongs to an owner: others get 404 (never 403, which would leak that it exists); staff see all."""


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

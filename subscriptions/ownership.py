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

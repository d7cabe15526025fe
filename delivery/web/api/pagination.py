"""List pagination with bounds: `limit` at most 1,000 and `offset` within what the database can count."""

from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 10**15  # far past any real table, far below PostgreSQL's bigint


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000

    def get_offset(self, request):
        return min(super().get_offset(request), MAX_OFFSET)

"""What every Herald API view uses, set on the views themselves rather than read from REST_FRAMEWORK, so the API
behaves the same inside a host project whatever its own DRF settings are: token (or Bearer) and session
authentication, authenticated users only, the storable-JSON parser, bounded pagination, filters and ordering,
Herald's error shapes and drf-spectacular's schema; every route refuses a path no object is named by (404) and
a query parameter it does not take (400)."""

import inspect

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter
from drf_spectacular.utils import extend_schema as spectacular_extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.filters import OrderingFilter
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import SAFE_METHODS, IsAuthenticated
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer

from delivery.engine.plumbing import tracing
from delivery.web.api.authentication import HeraldTokenAuthentication
from delivery.web.api.errors import api_exception_handler
from delivery.web.api.ownership import refuse_unnameable, tenant_of
from delivery.web.api.pagination import BoundedLimitOffsetPagination
from delivery.web.api.parsers import SafeJSONParser
from delivery.web.api.strict import refuse_body, refuse_unknown_parameters


class HeraldBrowsableAPIRenderer(BrowsableAPIRenderer):
    """DRF's browsable API, offering anonymous visitors a login link (the admin's login, back to the page after)."""

    template = "herald/api.html"


class HeraldAPI:
    authentication_classes = [HeraldTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    # JSON; multipart for the browsable API's HTML forms (URL-encoded forms get a 415 that says to send JSON).
    parser_classes = [SafeJSONParser, MultiPartParser]
    renderer_classes = [JSONRenderer, HeraldBrowsableAPIRenderer]
    pagination_class = BoundedLimitOffsetPagination
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    schema = AutoSchema()

    def dispatch(self, request, *args, **kwargs):
        # With tracing on, a caller's `traceparent` makes what this request publishes part of the caller's trace.
        with tracing.joined(request.META.get("HTTP_TRACEPARENT")):
            return super().dispatch(request, *args, **kwargs)

    def get_exception_handler(self):
        return api_exception_handler

    # What a tenant (a tenant key, request.auth) may do here: the names of the view's actions. Anything else
    # answers 404, as another owner's objects do: a tenant's slice is opened route by route, never by default.
    tenant_actions: frozenset[str] = frozenset()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication, permissions and throttles come first
        refuse_unnameable(kwargs)  # a path naming what no object can be named by: 404 before any lookup
        access = tenant_of(request)
        if access is not None:
            if getattr(self, "action", None) not in self.tenant_actions:
                raise NotFound()
            if access.read_only and request.method not in SAFE_METHODS:
                raise PermissionDenied("This key is read-only.")
        refuse_body(self, request)
        refuse_unknown_parameters(self, request)


# An action that answers a page of a list documents the paginator's parameters (and takes them: strict.py).
PAGE_PARAMETERS = [OpenApiParameter(BoundedLimitOffsetPagination.limit_query_param, int, required=False),
                   OpenApiParameter(BoundedLimitOffsetPagination.offset_query_param, int, required=False)]


def extend_schema(*, paginated: bool = False, **kwargs):
    """drf-spectacular's `extend_schema`, building on its own AutoSchema even where the project's
    DEFAULT_SCHEMA_CLASS is DRF's (the decorator otherwise bases an annotated action on that class). The query
    parameters it declares are the ones the handler takes (strict.refuse_unknown_parameters refuses others);
    `paginated`: the handler answers a page, and takes the paginator's parameters too."""
    parameters = [*(kwargs.get("parameters") or []), *(PAGE_PARAMETERS if paginated else [])]
    if parameters:
        kwargs["parameters"] = parameters
    decorate = spectacular_extend_schema(**kwargs)

    def decorator(function):
        if callable(function) and not inspect.isclass(function):
            if getattr(function, "schema", None) is None:
                function.kwargs = getattr(function, "kwargs", None) or {}
                function.kwargs.setdefault("schema", AutoSchema)
            function.query_parameters = frozenset(
                parameter.name for parameter in parameters
                if isinstance(parameter, OpenApiParameter) and parameter.location == OpenApiParameter.QUERY)
            function.answers_a_page = paginated
        return decorate(function)

    return decorator

"""Strict input: a field the API does not know is an error, not silently ignored (a typo such as `filter_polcy`
would otherwise subscribe to everything, and `{"ordered": true}` would leave ordering off); so is a query parameter
a route does not take (`?outcom=filtered_out` would list every row)."""

from collections.abc import Mapping

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import serializers
from rest_framework.filters import OrderingFilter
from rest_framework.settings import api_settings

IGNORED = {"csrfmiddlewaretoken"}  # the browsable API's HTML forms send it along


class StrictInput:
    """A serializer mixin: 400 naming every unknown field and the fields the request takes. Read-only fields a
    client sends back (as after a GET) are known, and ignored as DRF always did."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields and name not in IGNORED)
            if unknown:
                writable = sorted(name for name, field in self.fields.items() if not field.read_only)
                raise serializers.ValidationError({
                    name[:100]: [f"unknown field; this request takes {', '.join(writable)}"] for name in unknown[:20]})
        return super().to_internal_value(data)


class NoBodySerializer(serializers.Serializer):
    """An action that takes no body (its browsable-API form is just the button); a body with fields is refused."""


def refuse_body(view, request) -> None:
    """The strict rule for actions that take no body: any field sent is unknown."""
    if getattr(view, "serializer_class", None) is NoBodySerializer and request.method == "POST":
        sent = [str(name) for name in (request.data or {}) if name not in IGNORED] if isinstance(
            request.data, Mapping) else ["(body)"]
        if sent:
            raise serializers.ValidationError({name[:100]: ["unknown field; this request takes no body"]
                                               for name in sent[:20]})


def route_parameters(view, request) -> set[str]:
    """The query parameters a route takes: DRF's format switch on every route; those its handler declares in its
    schema (base.extend_schema records them); the paginator's on a list or a handler that answers a page
    (`extend_schema(paginated=True)`); a list's filters and ordering. A new route takes nothing else unless it
    says so where its documentation says so."""
    known = {api_settings.URL_FORMAT_OVERRIDE} - {None}
    action = getattr(view, "action", None)
    handler = getattr(view, action or request.method.lower(), None)
    known |= getattr(handler, "query_parameters", frozenset())
    pages = action == "list" or getattr(handler, "answers_a_page", False)
    if pages and getattr(view, "paginator", None) is not None:
        known |= {parameter["name"] for parameter in view.paginator.get_schema_operation_parameters(view)}
    if action == "list":
        backends = getattr(view, "filter_backends", ())
        if OrderingFilter in backends and getattr(view, "ordering_fields", None):
            known.add(OrderingFilter.ordering_param)
        filterset = DjangoFilterBackend().get_filterset_class(view, view.get_queryset()) if (
            DjangoFilterBackend in backends) else None
        if filterset is not None:
            known |= set(filterset.base_filters)
    return known


def refuse_unknown_parameters(view, request) -> None:
    """Every route refuses a query parameter it does not take (400 naming it), as a body refuses an unknown field:
    a misspelt or unsupported filter (`?tenant=` where there is none, `?outcom=`) would otherwise answer as if
    it had not been sent."""
    sent = set(request.query_params) - IGNORED
    known = route_parameters(view, request) if sent else set()
    unknown = sorted(sent - known)
    if unknown:
        what = "list" if getattr(view, "action", None) == "list" else "request"
        raise serializers.ValidationError({name[:100]: [f"is not a parameter of this {what}; it takes "
                                                        f"{', '.join(sorted(known))}"] for name in unknown[:10]})

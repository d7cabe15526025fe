"""Strict input: a field the API does not know is an error, not silently ignored (a typo such as `filter_polcy`
would otherwise subscribe to everything, and `{"ordered": true}` would leave ordering off)."""

from collections.abc import Mapping

from rest_framework import serializers

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

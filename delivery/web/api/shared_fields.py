"""Serializer fields built once per thread, for the input serializers every publish builds.

DRF gives each serializer instance its own fields: `Serializer.fields` deep-copies the declared ones, and a field's
deep copy is the field built again from its arguments. For a publish body's nine fields that is ~0.3 ms of the web
process's CPU per publish (docs/benchmarks.md, "The last cut"), spent to throw the copies away after one request.

A serializer class with `SharedFields` first in its bases reads its fields from one instance per thread and class,
built without data (the template): bound to the template, they validate any instance's data the same way, since
what a field reads during validation is its own arguments, its name and its root's `partial` and `context`, which
are the template's (not partial, no context). An instance asked to be partial or given a context builds its own
fields, as DRF does. Field-level `validate_<name>` methods and the serializer's own validators are still the
instance's. Fields are never changed after binding, so sharing them within a thread is safe; threads do not share.
"""

import threading

_templates = threading.local()


class SharedFields:
    """A serializer mixin (before `serializers.Serializer` in the bases): fields shared per thread and class."""

    @property
    def fields(self):
        if self.partial or self._context:
            return self._own_fields
        templates = _templates.__dict__.setdefault("by_class", {})
        template = templates.get(type(self))
        if template is None:
            template = templates[type(self)] = type(self)()
        return template._own_fields

    @property
    def _own_fields(self):
        """DRF's `fields`: this instance's own deep copy, made once."""
        own = self.__dict__.get("_herald_own_fields")
        if own is None:
            own = self.__dict__["_herald_own_fields"] = super().fields
        return own

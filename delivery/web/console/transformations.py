"""A subscription's transformation in the operator console: its field on the subscription's form (a code textarea
and an enabled checkbox, written through the service with the form's other fields: console/subscriptions.py), and
the "Test transformation" page, which runs the saved code once on the catalog's example of the subscription's event
type, or on a payload the operator pastes, and shows what it returned (transformation_trials: the API's and the
portal's test-run too). Nothing is sent or stored by a test-run."""

import json

from django import forms
from django.contrib.admin.utils import unquote
from django.core.exceptions import ValidationError
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse

from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules import answers
from delivery.transport import transforms
from delivery.web import transformation_trials

PLACEHOLDER = ("function handler(webhook) {\n  // change webhook.payload, webhook.method (POST or PUT), or set "
               "webhook.cancel = true\n  return webhook;\n}")


class TransformationWidget(forms.MultiWidget):
    template_name = "admin/herald/transformation_widget.html"

    def __init__(self):
        code = forms.Textarea(attrs={"rows": 12, "cols": 90, "spellcheck": "false", "class": "vLargeTextField",
                                     "style": "font-family: monospace", "placeholder": PLACEHOLDER})
        super().__init__([code, forms.CheckboxInput()])

    def id_for_label(self, id_):
        return f"{id_}_0" if id_ else id_  # the field's label names the code

    def decompress(self, value):
        value = value if isinstance(value, dict) else {}
        return [value.get("code", ""), value.get("enabled", True)]


class TransformationField(forms.MultiValueField):
    """{code, enabled}, or None where the code is left empty (no transformation). Its rules and the compile of its
    code are the service's (subscribing.checked_transformation), whose refusal the form shows on this field."""

    widget = TransformationWidget

    def __init__(self, **kwargs):
        super().__init__((forms.CharField(required=False, strip=False), forms.BooleanField(required=False)),
                         require_all_fields=False, required=False, **kwargs)

    def compress(self, data_list):
        code, enabled = (list(data_list) + ["", False])[:2]
        code = (code or "").replace("\r\n", "\n")  # a browser sends a textarea's lines with CRLF
        return {"code": code, "enabled": bool(enabled)} if code.strip() else None

    def has_changed(self, initial, data):
        try:
            value = self.clean(data)
        except ValidationError:
            return True
        if not isinstance(initial, dict):
            return value is not None
        return value != {"code": initial.get("code"), "enabled": initial.get("enabled", True)}


class TrialForm(forms.Form):
    event_type = forms.CharField(required=False, max_length=256,
                                 help_text="webhook.eventType; empty: the subscription's first event type.")
    payload = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={
        "rows": 10, "cols": 90, "style": "font-family: monospace"}),
        help_text="JSON; empty: the catalog's example of the event type.")

    def clean_payload(self):
        text = self.cleaned_data["payload"]
        if not text.strip():
            return transformation_trials.ABSENT
        value, problem = answers.json_value(text, max_chars=transforms.limits().output_bytes)
        if problem:
            raise ValidationError(f"The payload is {problem}.")
        return value


def defaults(subscription, event_type: str | None = None) -> dict:
    """The test page's fields as it opens (or after a run on the example): the event type (default: the
    subscription's first) and its catalog example."""
    event_type = event_type or transformation_trials.first_event_type(subscription)
    example = transformation_trials.catalog_example(subscription, event_type) if event_type else None
    return {"event_type": event_type, "payload": "" if example is None else json.dumps(example, indent=2)}


class TransformationTests:
    """ModelAdmin mixin of the subscriptions' page: the "Test transformation" page and its button, offered where a
    transformation is saved, to those who may change the subscription."""

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [path("<path:object_id>/transformation-test/", self.admin_site.admin_view(self.transformation_test),
                     name=f"{info[0]}_{info[1]}_transformation_test"), *super().get_urls()]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        pages = [] if obj is None or not obj.transformation else [
            {"name": "transformation-test", "label": "Test transformation", "url": self._test_url(obj),
             "title": "Run the saved code once on the event type's example (or a payload of yours); nothing is sent."}]
        return super().change_view(request, object_id, form_url, extra_context={
            "herald_pages": pages, **(extra_context or {})})

    def _test_url(self, obj) -> str:
        return reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_transformation_test", args=[obj.pk])

    def transformation_test(self, request, object_id):
        """GET: the page, its fields filled in; POST: one run, its result shown above them."""
        obj = self.get_object(request, unquote(object_id))
        if obj is None or not self.has_change_permission(request, obj):
            raise Http404("not found")  # the same answer as for a missing object: nothing to learn from it
        form, result = TrialForm(request.POST if request.method == "POST" else None, initial=defaults(obj)), None
        if form.is_bound and form.is_valid():
            payload, event_type = form.cleaned_data["payload"], form.cleaned_data["event_type"] or None
            try:
                result = transformation_trials.answer(
                    transformation_trials.trial(obj, payload=payload, event_type=event_type))
            except ApplicationError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            if result is not None and payload is transformation_trials.ABSENT:
                form = TrialForm(initial=defaults(obj, event_type))  # the example it ran on, shown
        return TemplateResponse(request, "admin/herald/transformation_test.html", {
            **self.admin_site.each_context(request), "title": "Test transformation", "opts": self.opts,
            "original": obj, "form": form, "result": result, "code": (obj.transformation or {}).get("code", ""),
            "payload_json": json.dumps(result.get("payload"), indent=2, ensure_ascii=False) if result else "",
            "change_url": reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk])})

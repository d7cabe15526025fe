"""Buttons on an admin object's page ("Retry now", "Redrive", "Enable"): each is a POST to a URL of the model admin
that calls one service and comes back to the page with what happened. The same services as the API and the list
actions, so the page offers nothing the API does not."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path, reverse

from delivery.engine.plumbing.errors import ApplicationError


@dataclass(frozen=True)
class Button:
    name: str
    label: str
    run: Callable  # (request, obj) -> a sentence saying what was done
    shown: Callable = lambda obj: True  # offered for this object?
    title: str = ""


class ButtonsMixin:
    """`buttons`: the Buttons of the object's page. Pages of records that cannot be edited (`read_only_page`) get no
    Save or Delete buttons."""

    change_form_template = "admin/herald/change_form.html"
    buttons: tuple[Button, ...] = ()
    read_only_page = False

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [path("<path:object_id>/do/<str:name>/", self.admin_site.admin_view(self.button_view),
                     name=f"{info[0]}_{info[1]}_button"), *super().get_urls()]

    def _button(self, name: str) -> Button:
        for button in self.buttons:
            if button.name == name:
                return button
        raise Http404("no such button")

    def button_view(self, request, object_id, name):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        button = self._button(name)
        if not request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}"):
            raise Http404("not found")  # the same answer as for a missing object: nothing to learn from it
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404("not found")
        try:
            self.message_user(request, button.run(request, obj), messages.SUCCESS)
        except ApplicationError as exc:
            self.message_user(request, f"{button.label}: {exc.message}", messages.WARNING)
        return redirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        info = self.opts.app_label, self.opts.model_name
        shown = [] if obj is None else [
            {"name": b.name, "label": b.label, "title": b.title,
             "url": reverse(f"admin:{info[0]}_{info[1]}_button", args=[obj.pk, b.name])}
            for b in self.buttons if b.shown(obj)]
        context = {"herald_buttons": shown, **(extra_context or {})}
        if self.read_only_page:
            context.update(show_save=False, show_save_and_continue=False, show_save_and_add_another=False,
                           show_delete=False, show_close=False)
        return super().change_view(request, object_id, form_url, extra_context=context)

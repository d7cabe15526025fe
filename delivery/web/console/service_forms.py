"""Console forms that write through the services the API calls, so that their rules are checked once, by the
service, for every door: a form's last validation step is the service's write (in a savepoint of the admin's
transaction); a refusal becomes the form's errors, on the fields it names, and nothing is written. The admin's
save step then has nothing left to do."""

from django import forms
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction

from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules.policy import PolicyError


class _DryRun(Exception):
    """Rolls back a write made only to hear what the service would refuse."""


class ServiceForm(forms.ModelForm):
    """Subclasses say how a change is written: `write(stored, changes)` (an edit; `stored` is the row as the
    database has it) and `create(changes)` (a new row; forms of rows created elsewhere need not)."""

    written = None  # what the service saved
    renamed: dict[str, str] = {}  # {the service's name of a field: this form's}

    def write(self, stored, changes: dict):
        raise NotImplementedError

    def create(self, changes: dict):
        raise NotImplementedError(f"{type(self).__name__} does not create rows")

    @staticmethod
    def new_only(made: tuple, field: str, refusal) -> object:
        """A service's (row, created) for the add page: the row, or a refusal naming `field` (`refusal(row)`, the
        words) when the service found it existing, which the API answers with the row itself."""
        row, created = made
        if not created:
            raise ApplicationError(refusal(row), field=field)
        return row

    def changes(self) -> dict:
        """What the form changed (everything it holds, for a new row)."""
        names = self.changed_data if self.instance.pk else list(self.cleaned_data)
        return {name: self.cleaned_data[name] for name in names if name in self.cleaned_data}

    def _post_clean(self):
        super()._post_clean()
        # With errors of the form's own (types, required fields) the service is still asked, for what it would say
        # of the rest (every error at once, as the API answers), but what it wrote is rolled back.
        dry_run = bool(self.errors)
        try:
            with transaction.atomic():
                if self.instance.pk:
                    stored = type(self.instance)._default_manager.get(pk=self.instance.pk)
                    written = self.write(stored, self.changes())
                else:
                    written = self.create(self.changes())
                if dry_run:
                    raise _DryRun
                self.written = self.instance = written
        except _DryRun:
            pass
        except ApplicationError as exc:
            # `extra` holds more fields' problems (of_problems) or context (a 409's ids): only the former are errors
            more = {name: reasons for name, reasons in exc.extra.items() if name in self.fields}
            self._refused({exc.field: [exc.message], **more}, skip=self.errors if dry_run else {})
        except DjangoValidationError as exc:
            self._refused(exc.message_dict if hasattr(exc, "error_dict") else {None: exc.messages},
                          skip=self.errors if dry_run else {})
        except PolicyError as exc:
            self._refused({"delivery_policy": [f"{path}: {reason}" for path, reason in exc.errors]},
                          skip=self.errors if dry_run else {})
        except Exception:
            if not dry_run:
                raise
            # what the form refused already left the service without something it needs: the form's errors stand

    def _refused(self, found: dict, skip) -> None:
        for name, reasons in found.items():
            name = self.renamed.get(name, name)
            if name in skip:
                continue  # the form's own error on this field says it first
            for reason in reasons if isinstance(reasons, list) else [reasons]:
                self.add_error(name if name in self.fields else None, str(reason))

    def save(self, commit=True):
        """The row the service saved (already written: the admin's own save is not needed)."""
        return self.written if self.written is not None else super().save(commit)


class ServiceAdmin:
    """ModelAdmin mixin for ServiceForm pages: the form wrote the row; the admin names it in its answer. Such a page
    has no inline formsets: the write is the form's last check, and a formset refused after it would leave the
    write committed behind an error page (tests/test_structure.py holds every ServiceAdmin to it)."""

    def save_model(self, request, obj, form, change):
        obj.pk = form.written.pk

    def save_related(self, request, form, formsets, change):
        for formset in formsets:  # the service saved the row itself: no many-to-many of the form's to save
            self.save_formset(request, form, formset, change=change)

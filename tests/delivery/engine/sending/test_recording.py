"""Attempt rows go in with a COPY (recording.store_attempts), which writes exactly the values it is given."""

from django.db.models import NOT_PROVIDED
from django.db.models.fields import DateField

from delivery.engine.sending import recording


def test_no_attempt_column_needs_django_or_the_database_to_make_its_value():
    """A db_default, a generated column or auto_now/auto_now_add would be skipped or broken by the COPY; a field
    added with one must be stored another way (or the COPY taught it)."""
    needing = [field.name for field in recording.COPIED
               if field.db_default is not NOT_PROVIDED or getattr(field, "generated", False)
               or (isinstance(field, DateField) and (field.auto_now or field.auto_now_add))]
    assert needing == []
    assert {field.name for field in recording.COPIED} >= {"delivery", "number", "exchange", "response_headers"}

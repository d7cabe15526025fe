"""The event catalog: an owner's event types (what a subscriber may choose, what a payload of one looks like) and
their versions (docs/tenants.md, "The event catalog"; docs/versions.md). Models of the subscriptions app, imported
by subscriptions/models.py."""

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

EVENT_TYPE_NAME_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9_.:-]{1,256}\Z", "Use 1 to 256 letters, digits, '_', '.', ':' or '-'.")
# An event version's name: names that sort as the versions follow one another (dates, e.g. 2026-11-01).
EVENT_VERSION_VALIDATOR = RegexValidator(
    r"^[0-9A-Za-z][0-9A-Za-z_.-]{0,63}\Z", "Use 1 to 64 letters, digits, '_', '.' or '-' (e.g. a date, 2026-11-01).")


class EventType(models.Model):
    """An entry of an owner's event catalog: what a subscriber may choose, what a payload of it looks like."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="event_types")
    name = models.CharField(max_length=256, validators=[EVENT_TYPE_NAME_VALIDATOR])
    description = models.TextField(blank=True, default="")
    schema = models.JSONField(null=True, blank=True, help_text="A JSON Schema (2020-12) of its payload.")
    example = models.JSONField(null=True, blank=True)
    validate_payloads = models.BooleanField(default=False, help_text=(
        "Check each publish's payload against the schema (what a mismatch does: on_mismatch)."))
    on_mismatch = models.CharField(max_length=8, default="refuse", db_default="refuse", choices=[
        ("refuse", "refuse the publish (400 naming the path)"),
        ("record", "record the mismatch on the message and deliver it")], help_text=(
        "What a payload that does not match does, with validate_payloads: refuse it, or record why on the message "
        "(the fan-out shows it, the log and /metrics count it) and deliver it all the same."))
    deprecated = models.BooleanField(default=False)
    open_to_tenants = models.BooleanField(default=True, help_text=(
        "Tenants see it and may choose it (on a topic open to them)."))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="event_type_unique_per_owner")]

    def __str__(self):
        return self.name


class EventTypeVersion(models.Model):
    """One version of an event type's payload (docs/versions.md). Names sort in the order the versions came; each
    but the oldest has a down-converter: JavaScript `handler(webhook)` turning a payload of this version into the
    one before it, so that an endpoint pinned to an older version receives the payload it was built for."""

    event_type = models.ForeignKey(EventType, on_delete=models.CASCADE, related_name="versions")
    name = models.CharField(max_length=64, validators=[EVENT_VERSION_VALIDATOR])
    schema = models.JSONField(null=True, blank=True, help_text="A JSON Schema (2020-12) of a payload of this version.")
    example = models.JSONField(null=True, blank=True)
    down_converter = models.TextField(blank=True, default="", help_text=(
        "JavaScript handler(webhook) turning a payload of this version into one of the version before it (empty for "
        "the oldest)."))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["event_type", "name"]
        constraints = [models.UniqueConstraint(fields=["event_type", "name"], name="event_version_unique_per_type")]

    def __str__(self):
        return f"{self.event_type.name} {self.name}"

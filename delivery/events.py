"""Publishing from code: `publish()` and `publish_on_save()`.

Called inside `transaction.atomic()`, `publish()` writes the message and its deliveries in the caller's transaction
(a transactional outbox): if the transaction rolls back, no event exists and nothing is sent; once it commits, the
first attempts go out. The business write and its event commit together or not at all, which a separate webhook
service cannot offer. The cost is the publish's own writes inside the caller's transaction (an insert for the
message, one bulk insert for up to HERALD_INLINE_FANOUT deliveries; above that only the message, and a job writes
the deliveries after commit) and one Redis round trip after the commit.
"""

import json
from collections.abc import Callable, Iterable

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models.signals import post_delete, post_save
from django.forms.models import model_to_dict

from delivery.conf import herald
from delivery.engine.accounts.subscribing import topic_create
from delivery.engine.intake.publishing import entry_from, publish_one
from delivery.engine.plumbing.errors import ApplicationError
from delivery.models import Message
from delivery.rules.storable import json_problems
from subscriptions.models import TOPIC_NAME_VALIDATOR, Topic


class PublishError(ValueError):
    """The event could not be published: a bad argument, an unknown topic, a payload too large."""


def _owner(owner):
    if owner is None:
        owner = herald.PUBLISH_OWNER or None
        if owner is None:
            raise PublishError("A topic given by name needs its owner: pass owner= (a user or a username) or set "
                               "HERALD_PUBLISH_OWNER.")
    if isinstance(owner, str):
        found = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: owner}).first()
        if found is None:
            raise PublishError(f"No user {owner!r} to own the topic.")
        return found
    return owner


def resolve_topic(topic, owner=None, create: bool | None = None) -> Topic:
    """A Topic, or the owner's topic of that name; created if missing when `create` (default
    HERALD_CREATE_TOPICS_ON_PUBLISH) allows it."""
    if isinstance(topic, Topic):
        return topic
    if not isinstance(topic, str):
        raise PublishError(f"topic must be a Topic or a topic's name, not {type(topic).__name__}")
    try:
        TOPIC_NAME_VALIDATOR(topic)
    except DjangoValidationError:
        raise PublishError(f"{topic!r} is not a valid topic name: use 1 to 256 letters, digits, '_', '.' or '-'."
                           ) from None
    user = _owner(owner)
    found = Topic.objects.filter(owner=user, name=topic).first()
    if found is not None:
        return found
    if not (herald.CREATE_TOPICS_ON_PUBLISH if create is None else create):
        raise PublishError(f"{user} has no topic {topic!r}; create it first, or pass create=True.")
    return topic_create(owner=user, name=topic)[0]


def publish(topic, payload=None, *, owner=None, event_type: str = "herald.message", subject: str = "",
            attributes: dict | None = None, idempotency_key: str | None = None, text: str | None = None,
            create: bool | None = None, ordering_key: str | None = None, tenant=None,
            broadcast: bool = False, unknown_tenant: str | None = None, event_version: str | None = None) -> Message:
    """Publish an event to `topic` (a Topic, or a topic's name with `owner` or HERALD_PUBLISH_OWNER) and return
    its Message. `payload` is any JSON value; `text` sends plain text instead. Inside `transaction.atomic()` the
    event is part of the caller's transaction: nothing is sent unless and until it commits. The same
    `idempotency_key` on the same topic within 24 hours returns the first message instead of a second one.
    Subscriptions with ordered delivery receive the messages of one `ordering_key` in publish order. `tenant` (a
    Tenant or its external id) addresses the event to that tenant's subscriptions (and the owner's own);
    `broadcast=True` to every tenant's; neither: the owner's own subscriptions only (docs/tenants.md). A `tenant`
    the owner has not registered is, by `unknown_tenant` (default HERALD_PUBLISH_UNKNOWN_TENANT, "record"):
    "record" (the message is kept for the owner's own subscriptions, a warning logged: the caller's transaction
    goes on), "create" (the tenant is registered now, within HERALD_MAX_TENANTS_PER_OWNER) or "refuse"
    (PublishError). `event_version`: the version of its event type the payload is in (default: the latest; see
    docs/versions.md)."""
    resolved = resolve_topic(topic, owner, create)
    data = {"event_type": event_type, "subject": subject, "attributes": attributes or {}}
    if event_version is not None:
        data["event_version"] = event_version
    if ordering_key is not None:
        data["ordering_key"] = ordering_key
    if tenant is not None:
        data["tenant"] = tenant if isinstance(tenant, str) else getattr(tenant, "external_id", tenant)
        data["unknown_tenant"] = unknown_tenant or herald.PUBLISH_UNKNOWN_TENANT
    if broadcast:
        data["broadcast"] = broadcast
    data.update({"message": text} if text is not None else {"payload": payload})
    if idempotency_key is not None and (not isinstance(idempotency_key, str) or not 0 < len(idempotency_key) <= 255):
        raise PublishError("idempotency_key: 1 to 255 characters")
    problems = json_problems(data)
    if problems:
        raise PublishError("; ".join(f"{path}: {reason}" for path, reason in problems))
    try:
        entry = entry_from(data, idempotency_key=idempotency_key)
        message, _, _ = publish_one(resolved, entry)
    except ApplicationError as exc:  # a bad argument, or the idempotency key was used with a different event
        raise PublishError(_words(exc)) from None
    return message


def _words(exc: ApplicationError) -> str:
    """An error as one line, naming its fields: `event_type: event types starting with …`."""
    named = exc.as_payload()
    if "detail" in named:
        return named["detail"]
    return "; ".join(f"{field}: {' '.join(reasons)}" for field, reasons in named.items())


def model_payload(instance, fields: Iterable[str] | None = None) -> dict:
    """A model instance as JSON: its primary key and fields (dates, decimals and UUIDs as strings)."""
    values = model_to_dict(instance, fields=list(fields) if fields is not None else None)
    values[instance._meta.pk.name] = instance.pk
    return json.loads(json.dumps(values, cls=DjangoJSONEncoder))


def publish_on_save(model, topic, *, owner=None, event_prefix: str | None = None, fields: Iterable[str] | None = None,
                    payload: Callable | None = None, on=("created", "updated", "deleted"), create: bool | None = None):
    """Publish an event whenever a `model` instance is created, updated or deleted: `<prefix>.created`, `.updated`,
    `.deleted` (prefix: the model's label in lower case, e.g. `shop.order`), subject `<prefix>:<pk>`, the payload
    from `payload(instance)` or the instance's `fields`. The event is written in the same transaction as the save
    (post_save runs inside it), so it goes out only if the save commits — unlike webhooks sent from a signal
    directly. Returns a function that disconnects the handlers."""
    prefix = event_prefix or model._meta.label_lower
    make = payload or (lambda instance: model_payload(instance, fields))
    uid = f"herald-publish-on-save:{model._meta.label}:{id(make)}"

    def saved(sender, instance, created, raw=False, **kwargs):
        kind = "created" if created else "updated"
        if raw or kind not in on:
            return
        publish(topic, make(instance), owner=owner, event_type=f"{prefix}.{kind}", subject=f"{prefix}:{instance.pk}",
                create=create)

    def deleted(sender, instance, **kwargs):
        if "deleted" in on:
            publish(topic, make(instance), owner=owner, event_type=f"{prefix}.deleted",
                    subject=f"{prefix}:{instance.pk}", create=create)

    post_save.connect(saved, sender=model, weak=False, dispatch_uid=uid + ":save")
    post_delete.connect(deleted, sender=model, weak=False, dispatch_uid=uid + ":delete")

    def disconnect():
        post_save.disconnect(sender=model, dispatch_uid=uid + ":save")
        post_delete.disconnect(sender=model, dispatch_uid=uid + ":delete")

    return disconnect

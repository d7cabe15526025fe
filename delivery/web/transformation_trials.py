"""A test-run of a subscription's transformation, the same through every door (the API's `transformation/test/`, the
console's "Test transformation", the portal's Test): nothing is sent or stored.

What runs is the code given, else the subscription's saved code; on the payload given, else the catalog's example
of the event type; the event type given, else the subscription's first event type (an exact name, not a `*`
pattern). One run in the sandbox's process within the transformations' limits (transport/transforms.trial), which
answers what the handler returned or why it could not (its line, when the error has one). Input that cannot make a
run is a 400 naming the field; a tenant's subscription where the owner's portal does not allow transformations, a
403.
"""

from delivery.engine.accounts import tenancy
from delivery.engine.plumbing.errors import ApplicationError
from delivery.rules import send_shares, subscription_rules
from delivery.transport import transforms
from delivery.transport.sandbox import Outcome
from subscriptions.models import EventType, Subscription

ABSENT = object()  # no payload given (null is a payload)
NO_CODE = "give the code to test: this subscription has no transformation saved"


def trial(subscription: Subscription, *, code: str | None = None, payload=ABSENT, event_type: str | None = None
          ) -> Outcome:
    """One run of the transformation on a webhook of `event_type` carrying `payload` (see the module's docstring)."""
    tenancy.tenant_transformations(subscription.tenant if subscription.tenant_id is not None else None)
    if code is None:
        code = (subscription.transformation or {}).get("code")
        if not code:
            raise ApplicationError(NO_CODE, field="code")
    problem = subscription_rules.code_problem(code, transforms.limits().code_bytes)
    if problem:
        raise ApplicationError(problem, field="code")
    if event_type is None:
        event_type = first_event_type(subscription)
    if payload is ABSENT:
        payload = _example(subscription, event_type)
    return transforms.trial(code, transforms.webhook(event_type, payload, url=subscription.endpoint.url),
                            share=send_shares.share_of(subscription.topic.owner_id, subscription.tenant_id))


def first_event_type(subscription: Subscription) -> str:
    """The event type a test-run takes by default: the subscription's first, when it names one ("" otherwise)."""
    first = next(iter(subscription.event_types or []), "")
    return first if isinstance(first, str) and "*" not in first else ""


def catalog_example(subscription: Subscription, event_type: str):
    """The catalog's example of `event_type` that the subscription's owner (for a tenant's, among the types open to
    tenants) keeps, or None."""
    types = EventType.objects.filter(owner_id=subscription.topic.owner_id, name=event_type)
    if subscription.tenant_id is not None:
        types = types.filter(open_to_tenants=True)
    return types.filter(example__isnull=False).values_list("example", flat=True).first()


def _example(subscription: Subscription, event_type: str):
    found = catalog_example(subscription, event_type) if event_type else None
    if found is None:
        named = f"the event type {event_type!r} has no example in the catalog" if event_type else (
            "no event type of the catalog is named, whose example it would take")
        raise ApplicationError(f"give a payload to test with: {named}", field="payload")
    return found


def answer(outcome: Outcome) -> dict:
    """What a test-run answers: {ok, method, payload, cancelled} or {ok, error, line}."""
    if not outcome.ok:
        return {"ok": False, "error": outcome.error, "line": outcome.line}
    return {"ok": True, "method": outcome.method, "payload": outcome.payload, "cancelled": outcome.cancel}
